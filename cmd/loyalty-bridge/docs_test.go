//go:build !production

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apicall"
)

// The documentation is README.md and docs/*.md; CHANGELOG.md is history and
// may name what no longer exists.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// TestDocsLinks: every relative link in README.md and docs/*.md names a
// file or directory of the repository, and a #anchor names a heading of
// the markdown file it points into.
func TestDocsLinks(t *testing.T) {
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range brokenLinks(f, string(text)) {
			t.Errorf("%s: %s", strings.TrimPrefix(f, "../../"), p)
		}
	}
}

// TestDocsFlags: every --flag the documentation names exists. One named in
// a command line (a code block's line or an inline code span that starts
// with loyalty-bridge <command>, loyalty-sim, loyalty-bench, or one of
// scripts/) must be in that command's --help; one named in prose must be
// in some command's. Command lines of other tools (go, docker, kubectl,
// kcat …) are not checked.
func TestDocsFlags(t *testing.T) {
	helps := commandFlags(t)
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range unknownFlags(string(text), helps) {
			t.Errorf("%s: %s", strings.TrimPrefix(f, "../../"), p)
		}
	}
}

// The checkers themselves fail on what they must catch.
func TestDocsCheckersCatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("# A title\n\n## Some `code` heading, here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "b.md")
	for _, tc := range []struct {
		text string
		bad  bool
	}{
		{"see [a](a.md) and [h](a.md#some-code-heading-here) and [web](https://example.com/x.md)", false},
		{"see [a](missing.md)", true},
		{"see [h](a.md#no-such-heading)", true},
		{"```\n[not a link](missing.md)\n```\n", false},
		{"## Here\n\n[self](#here)", false},
		{"[self](#elsewhere)", true},
	} {
		if got := brokenLinks(doc, tc.text); (len(got) > 0) != tc.bad {
			t.Errorf("%q: broken links %q, want broken %v", tc.text, got, tc.bad)
		}
	}
	helps := map[string][]string{"run": {"brokers", "partner-jwt-issuer"}, "dev": {"demo"}, "loyalty-sim": {"addr"}, "loyalty-bench": {"bridge-arg"}}
	for _, tc := range []struct {
		text string
		bad  bool
	}{
		{"set `--brokers`, or `--partner-jwt-*`", false},
		{"set `--invented-flag`", true},
		{"```sh\nloyalty-bridge dev --demo 20\n```", false},
		{"```sh\nloyalty-bridge dev --brokers x\n```", true}, // run's, not dev's
		{"```sh\ngo run ./cmd/loyalty-bridge run --demo 1\n```", true},
		{"```sh\nLOYALTY_BRIDGE_X=1 loyalty-sim --addr :0 | docker run --rm x\n```", false},
		{"`loyalty-sim --brokers x`", true},
		{"```sh\nkcat --whatever\n```", false},
		{"```sh\ngo run ./cmd/loyalty-bench --bridge-arg=--brokers=x\n```", false}, // run's, through the bench
		{"```sh\ngo run ./cmd/loyalty-bench --bridge-arg=--demo=1\n```", true},
		{"```sh\ngo run ./cmd/loyalty-bench --brokers x\n```", true},
	} {
		if got := unknownFlags(tc.text, helps); (len(got) > 0) != tc.bad {
			t.Errorf("%q: unknown flags %q, want unknown %v", tc.text, got, tc.bad)
		}
	}
}

var (
	linkRE   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`\n]+`")
	flagRE   = regexp.MustCompile(`--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(-\*)?`)
	// bridgeArgRE is loyalty-bench's --bridge-arg with its value, a flag
	// of loyalty-bridge run.
	bridgeArgRE = regexp.MustCompile(`--bridge-arg[= ]"?(--[^\s"]+)"?`)
	helpFlag    = regexp.MustCompile(`(?m)^\s+-{1,2}([a-z][a-z0-9-]*)`)
	scriptRE    = regexp.MustCompile(`(?:^|/)(scripts/[a-z/_.]+)$`)
	envAssign   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
)

// outsideFences calls fn with each line of text and whether it is inside
// a fenced code block.
func outsideFences(text string, fn func(line string, fenced bool)) {
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		fn(line, fenced)
	}
}

// anchors are the GitHub anchors of a markdown text's headings.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	outsideFences(text, func(line string, fenced bool) {
		if fenced || !strings.HasPrefix(line, "#") {
			return
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	})
	return out
}

func brokenLinks(file, text string) []string {
	var bad []string
	outsideFences(text, func(line string, fenced bool) {
		if fenced {
			return
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			full := file
			if path != "" {
				full = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(full); err != nil {
					bad = append(bad, fmt.Sprintf("link %s: no such file", target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(full, ".md") {
				continue
			}
			var src string
			if path == "" {
				src = text
			} else {
				b, err := os.ReadFile(full)
				if err != nil {
					bad = append(bad, fmt.Sprintf("link %s: %v", target, err))
					continue
				}
				src = string(b)
			}
			if !anchors(src)[anchor] {
				bad = append(bad, fmt.Sprintf("link %s: no heading with that anchor", target))
			}
		}
	})
	return bad
}

// commandOf names the command a command line runs, as a key of the helps
// map ("run", "api accrue", "loyalty-sim", "scripts/kafka"), "" for a line
// of another tool, and the rest of the line after the command.
func commandOf(line string, helps map[string][]string) (string, string) {
	words := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(line))
	for len(words) > 0 && (envAssign.MatchString(words[0]) || words[0] == "cd" || words[0] == "&&" || strings.HasPrefix(words[0], "$")) {
		if words[0] == "cd" && len(words) > 1 {
			words = words[1:]
		}
		words = words[1:]
	}
	if len(words) >= 3 && words[0] == "go" && words[1] == "run" {
		words = words[2:]
	}
	if len(words) == 0 {
		return "", ""
	}
	name := strings.TrimPrefix(words[0], "./cmd/")
	rest := strings.Join(words[1:], " ")
	switch {
	case name == "loyalty-bridge" && len(words) > 1:
		cmd := words[1]
		if cmd == "api" && len(words) > 2 && !strings.HasPrefix(words[2], "-") {
			cmd += " " + words[2]
		}
		if _, ok := helps[cmd]; ok {
			return cmd, rest
		}
		return "loyalty-bridge " + cmd, rest // an unknown command: no flag of it exists
	case name == "loyalty-sim" || name == "loyalty-bench":
		return name, rest
	}
	if m := scriptRE.FindStringSubmatch(words[0]); m != nil {
		if _, ok := helps[m[1]]; ok {
			return m[1], rest
		}
	}
	return "", ""
}

func unknownFlags(text string, helps map[string][]string) []string {
	all := map[string]bool{}
	for _, fs := range helps {
		for _, f := range fs {
			all[f] = true
		}
	}
	has := func(names []string, set map[string]bool, flag string, prefix bool) bool {
		for _, n := range names {
			if n == flag || prefix && strings.HasPrefix(n, flag+"-") {
				return true
			}
		}
		for n := range set {
			if n == flag || prefix && strings.HasPrefix(n, flag+"-") {
				return true
			}
		}
		return false
	}
	var bad []string
	var check func(cmd, rest string)
	check = func(cmd, rest string) {
		if cmd == "loyalty-bench" {
			// --bridge-arg hands its value to the bridge's run command.
			for _, m := range bridgeArgRE.FindAllStringSubmatch(rest, -1) {
				check("run", m[1])
			}
			rest = bridgeArgRE.ReplaceAllString(rest, "--bridge-arg")
		}
		for _, m := range flagRE.FindAllStringSubmatch(rest, -1) {
			flag, prefix := m[1], m[2] != ""
			if flag == "help" { // every command's, from package flag
				continue
			}
			if cmd == "" {
				if !has(nil, all, flag, prefix) {
					bad = append(bad, fmt.Sprintf("--%s is no flag of any command", flag))
				}
			} else if !has(helps[cmd], nil, flag, prefix) {
				bad = append(bad, fmt.Sprintf("--%s is not in the help of %s", flag, cmd))
			}
		}
	}
	// A code block's line continues on the next when it ends in '\'.
	var cont string
	outsideFences(text, func(line string, fenced bool) {
		if fenced {
			line = cont + line
			if strings.HasSuffix(line, `\`) {
				cont = strings.TrimSuffix(line, `\`) + " "
				return
			}
			cont = ""
			line, _, _ = strings.Cut(line, " #") // a comment
			for _, seg := range regexp.MustCompile(`\||;|&&`).Split(line, -1) {
				if cmd, rest := commandOf(seg, helps); cmd != "" {
					check(cmd, rest)
				}
			}
			return
		}
		for _, span := range codeSpan.FindAllString(line, -1) {
			span = strings.Trim(span, "`")
			cmd, rest := commandOf(span, helps)
			switch {
			case cmd != "":
				check(cmd, rest)
			case strings.HasPrefix(span, "-"):
				check("", span)
			default:
				// Another tool's command line (docker build --build-arg …)
				// or a value; its flags are not ours.
				if w := strings.Fields(span); len(w) > 0 && !strings.HasPrefix(w[0], "-") && strings.Contains(span, " --") {
					continue
				}
				check("", span)
			}
		}
		check("", codeSpan.ReplaceAllString(line, ""))
	})
	return bad
}

// commandFlags are the flags of every command the documentation runs:
// loyalty-bridge's commands (and api's calls) from their --help, run here
// in process; loyalty-sim's and loyalty-bench's from the --help of the
// binaries built from this tree; the scripts' from their text (their
// usage is their header comment and their argument parser).
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	helps := map[string][]string{}
	help := func(args ...string) string {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if code := run(ctx, env{stdout: &out, stderr: &out, lookup: func(string) (string, bool) { return "", false }}, append(args, "-h")); code != 0 {
			t.Fatalf("%v -h: exit %d\n%s", args, code, out.String())
		}
		return out.String()
	}
	names := func(help string) []string {
		var fs []string
		for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
			fs = append(fs, m[1])
		}
		return fs
	}
	for cmd := range commands() {
		if cmd == "api" {
			for call := range apicall.Calls() {
				helps["api "+call] = names(help("api", call))
			}
			continue
		}
		helps[cmd] = names(help(cmd))
	}
	helps["api"] = slices.Concat(helps["api token"], helps["api sign"])

	bin := t.TempDir()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds loyalty-sim and loyalty-bench for their --help: %v", err)
	}
	build := exec.Command(gobin, "build", "-o", bin+string(filepath.Separator), "../loyalty-sim", "../loyalty-bench")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"loyalty-sim", "loyalty-bench"} {
		out, err := exec.Command(filepath.Join(bin, name), "-h").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -h: %v\n%s", name, err, out)
		}
		helps[name] = names(string(out))
	}
	for _, script := range []string{"scripts/kafka", "scripts/registry", "scripts/soak", "scripts/pyreader/read_replies.py", "scripts/pyreader/venv"} {
		b, err := os.ReadFile(filepath.Join("../..", script))
		if err != nil {
			t.Fatal(err)
		}
		var fs []string
		for _, m := range flagRE.FindAllStringSubmatch(string(b), -1) {
			fs = append(fs, m[1])
		}
		helps[script] = fs
	}
	for cmd, fs := range helps {
		if len(fs) == 0 && !strings.HasPrefix(cmd, "scripts/") {
			t.Fatalf("no flags read from the help of %s", cmd)
		}
	}
	return helps
}

// Every alert in deploy/prometheus/alerts.yaml has its runbook, a heading
// named after it in docs/operating.md.
func TestDocsRunbookPerAlert(t *testing.T) {
	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	heads := anchors(string(ops))
	names := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(names) == 0 {
		t.Fatal("no alerts read")
	}
	for _, m := range names {
		if !heads[strings.ToLower(m[1])] {
			t.Errorf("alert %s has no runbook (a heading ### %s in docs/operating.md)", m[1], m[1])
		}
	}
}
