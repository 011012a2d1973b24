package config

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// canary is a password put into URLs: no error and no --print-config
// output may carry it.
const canary = "s3cret-canary"

// Credentials in any URL setting are refused, naming the setting and
// where credentials go instead, and the refusal never shows the password:
// not when the URL parses, not when url.Parse refuses it (its error
// quotes the whole text), whether it came from a flag, a variable or the
// --config file.
func TestCredentialsInURLsRefused(t *testing.T) {
	yml := func(body string) string {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		want  []string // in the error
		parse bool     // refused as not a URL rather than for its credentials
	}{
		{name: "registry over http, the issue's example", args: []string{"--schema-registry-url", "http://svc:" + canary + "@registry.corp:8081"},
			want: []string{"--schema-registry-url", "http://***@registry.corp:8081", "--schema-registry-password"}},
		{name: "registry over https", args: []string{"--schema-registry-url", "https://svc:" + canary + "@registry.corp"},
			want: []string{"--schema-registry-url", "--schema-registry-username"}},
		{name: "the second registry", args: []string{"--schema-registry-url", "https://r1.corp,https://svc:" + canary + "@r2.corp"},
			want: []string{"--schema-registry-url", "https://***@r2.corp"}},
		{name: "registry user only", args: []string{"--schema-registry-url", "https://svc@registry.corp"},
			want: []string{"--schema-registry-url", "--schema-registry-username"}},
		{name: "registry from the environment", env: map[string]string{"LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL": "http://svc:" + canary + "@registry.corp:8081"},
			want: []string{"--schema-registry-url"}},
		{name: "registry from the file", args: []string{"--config", yml("schema-registry-url: http://svc:" + canary + "@registry.corp:8081\n")},
			want: []string{"--schema-registry-url"}},
		{name: "partner base URL", args: []string{"--api-base-url", "https://shop:" + canary + "@loyalty.partner.example"},
			want: []string{"--api-base-url", "https://***@loyalty.partner.example", "--password", "LOYALTY_BRIDGE_API_PASSWORD_FILE"}},
		{name: "identity provider URL", args: []string{"--api-base-url", "https://loyalty.partner.example", "--auth-url", "https://shop:" + canary + "@id.partner.example"},
			want: []string{"--auth-url", "https://***@id.partner.example", "--client-secret"}},
		// url.Parse refuses these, quoting them whole in its error.
		{name: "a slash in the password", args: []string{"--schema-registry-url", "http://svc:" + canary + "/x@registry.corp"},
			want: []string{"--schema-registry-url", "http://***@registry.corp"}, parse: true},
		{name: "no scheme", args: []string{"--schema-registry-url", "svc:" + canary + "@registry.corp:8081"},
			want: []string{"--schema-registry-url", "***@registry.corp:8081"}, parse: true},
		{name: "a bad escape", args: []string{"--api-base-url", "https://shop:" + canary + "%zz@loyalty.partner.example"},
			want: []string{"--api-base-url"}, parse: true},
		{name: "a bad host", args: []string{"--api-base-url", "https://loyalty.partner.example", "--auth-url", "https://shop:" + canary + "@[id"},
			want: []string{"--auth-url"}, parse: true},
		// Not a URL setting, but a place an operator may put them.
		{name: "a broker with credentials", args: []string{"--brokers", "kafka-0:9092,svc:" + canary + "@kafka-1:9092"},
			want: []string{"--brokers", "entry 2", "--kafka-sasl-username"}, parse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range creds {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := parse(t, tc.args, env)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, canary) || strings.Contains(msg, "canary") {
				t.Fatalf("error shows the password:\n%s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q:\n%s", w, msg)
				}
			}
			if !tc.parse && !strings.Contains(msg, "credentials do not go in the URL") {
				t.Errorf("error does not say why:\n%s", msg)
			}
		})
	}
}

// A URL that url.Parse refuses without credentials in it keeps the
// parser's reason.
func TestBadURLKeepsReason(t *testing.T) {
	_, err := parse(t, []string{"--api-base-url", "http://[::1"}, creds)
	if err == nil || !strings.Contains(err.Error(), `--api-base-url "http://[::1": not a URL: missing ']' in host`) {
		t.Fatalf("got %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://registry.corp:8081/x?y=1", "https://registry.corp:8081/x?y=1"},
		{"http://svc:pw@registry.corp:8081", "http://***@registry.corp:8081"},
		{"http://svc@registry.corp", "http://***@registry.corp"},
		{"http://svc:p@ss@registry.corp", "http://***@registry.corp"},
		{"http://svc:p/ss#x@registry.corp/path", "http://***@registry.corp/path"},
		{"svc:pw@registry.corp", "***@registry.corp"},
		{"http://a.corp,http://svc:pw@b.corp", "http://***@b.corp"},
		{"@", "***@"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// --print-config shows a configuration that does not validate too, so it
// masks a URL's credentials itself, from a flag, a variable or the file.
func TestWriteYAMLMasksURLCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("auth-url: https://shop:"+canary+"@id.partner.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, b := Define(fs)
	env := map[string]string{"LOYALTY_BRIDGE_API_BASE_URL": "https://shop:" + canary + "@loyalty.partner.example"}
	if err := b.ParseWithFile([]string{"--schema-registry-url", "http://svc:" + canary + "@registry.corp:8081", "--config", file},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "config"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteYAML(&out, b, "config")
	if strings.Contains(out.String(), "canary") {
		t.Fatalf("output shows the password:\n%s", out.String())
	}
	for _, want := range []string{`schema-registry-url: "http://***@registry.corp:8081"`, `api-base-url: "https://***@loyalty.partner.example"`,
		`auth-url: "https://***@id.partner.example"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}
