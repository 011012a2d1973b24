package config

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/noredirect"
)

// Registry is the connection to the Schema Registry: its URLs, basic auth
// and TLS.
type Registry struct {
	URL      string
	Username string
	Password string
	CAFile   string
	CertFile string
	KeyFile  string
	// AllowInsecure is --allow-insecure, shared with the other sections.
	AllowInsecure *bool

	binder *flagenv.Binder // which secrets came from *_FILE
}

// Define defines the section's flags on b's flag set and binds them.
func (r *Registry) Define(b *flagenv.Binder) {
	r.binder = b
	fs := b.FlagSet()
	fs.StringVar(&r.URL, "schema-registry-url", "http://127.0.0.1:8081", "Schema Registry URL (comma-separated for several), without credentials: they go in --schema-registry-username and --schema-registry-password")
	fs.StringVar(&r.Username, "schema-registry-username", "", "Schema Registry basic-auth user")
	fs.StringVar(&r.Password, "schema-registry-password", "", "Schema Registry basic-auth password (from a *_FILE: read again, if the file changed, at each request)")
	fs.StringVar(&r.CAFile, "schema-registry-ca-file", "", "PEM CA bundle for the registry's certificate (default: system roots)")
	fs.StringVar(&r.CertFile, "schema-registry-cert-file", "", "client certificate (PEM) for mutual TLS with the registry")
	fs.StringVar(&r.KeyFile, "schema-registry-key-file", "", "client certificate key (PEM)")
	r.AllowInsecure = allowInsecure(b)
	b.Secret("schema-registry-password", "")
}

// registryCreds is where the registry's credentials go instead of its URL.
const registryCreds = "--schema-registry-username and --schema-registry-password (or " + EnvPrefix + "SCHEMA_REGISTRY_PASSWORD_FILE)"

// URLs is --schema-registry-url split.
func (r *Registry) URLs() []string {
	var out []string
	for _, u := range strings.Split(r.URL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Validate reports every problem of the section, each naming its flag.
func (r *Registry) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	urls := r.URLs()
	if len(urls) == 0 {
		bad("--schema-registry-url: required")
	}
	for _, u := range urls {
		if err := checkURL("--schema-registry-url", u, registryCreds); err != nil {
			errs = append(errs, err)
		} else if r.Username != "" && plaintextURL(u) && !(r.AllowInsecure != nil && *r.AllowInsecure) {
			bad("--schema-registry-url %s: basic auth over http sends the password in the clear; use https, or pass --%s on a test network",
				RedactURL(u), InsecureFlag)
		}
	}
	if (r.Username == "") != (r.Password == "") {
		bad("--schema-registry-username and --schema-registry-password go together")
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		bad("--schema-registry-cert-file and --schema-registry-key-file go together")
	}
	return errors.Join(errs...)
}

// Build is BuildLogged without a logger.
func (r *Registry) Build() (*sr.Client, error) { return r.BuildLogged(nil) }

// BuildLogged returns a registry client. It does not follow redirects, so
// basic auth is never sent to another host. A password from
// LOYALTY_BRIDGE_SCHEMA_REGISTRY_PASSWORD_FILE is taken from the file at
// every request (a stat; read again only when the file changed), so a
// rotated Secret is used without a restart. log (nil: none) hears of such a
// change, or of a file that cannot be read again.
func (r *Registry) BuildLogged(log *zap.Logger) (_ *sr.Client, err error) {
	defer settingError(&err)
	cfg, err := tlsConfig("schema-registry", r.CAFile, r.CertFile, r.KeyFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	hc := noredirect.Client(&http.Client{Transport: tr, Timeout: 30 * time.Second})
	opts := []sr.ClientOpt{sr.URLs(r.URLs()...), sr.HTTPClient(hc)}
	if r.Username != "" {
		rs, err := secretFile(r.binder, "schema-registry-password", log)
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-password: %w", err)
		}
		if rs == nil {
			opts = append(opts, sr.BasicAuth(r.Username, r.Password))
		} else {
			user := r.Username
			opts = append(opts, sr.PreReq(func(req *http.Request) error {
				req.SetBasicAuth(user, rs.value())
				return nil
			}))
		}
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("--schema-registry-url: %w", err)
	}
	return cl, nil
}
