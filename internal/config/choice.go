package config

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// choice is a flag whose text is parsed once, into a typed value. A bad
// value does not stop the flag parse: it is kept and reported by Validate
// with every other problem, naming its flag.
type choice[T any] struct {
	p     *T
	parse func(string) (T, error)
	text  string // the bad value, while err is set
	err   error
	set   bool // a value was given (flag, environment or file)
}

func defineChoice[T any](fs *flag.FlagSet, p *T, name string, value T, parse func(string) (T, error), usage string) *choice[T] {
	*p = value
	c := &choice[T]{p: p, parse: parse}
	fs.Var(c, name, usage)
	return c
}

func (c *choice[T]) String() string {
	if c == nil || c.p == nil {
		return ""
	}
	if c.err != nil {
		return c.text
	}
	return fmt.Sprint(*c.p)
}

func (c *choice[T]) Set(s string) error {
	c.set = true
	v, err := c.parse(s)
	if err != nil {
		c.text, c.err = s, err
		return nil
	}
	*c.p, c.text, c.err = v, "", nil
	return nil
}

// given reports whether a value was given.
func (c *choice[T]) given() bool { return c != nil && c.set }

// check returns the parse error of the last value given, naming the flag.
// A section built without Define has no choices to check.
func (c *choice[T]) check(name string) error {
	if c == nil || c.err == nil {
		return nil
	}
	return fmt.Errorf("--%s %q: %w", name, c.text, c.err)
}

// insecureFlag is --allow-insecure. Every section that can send a secret
// in the clear defines it through allowInsecure, so a command composed of
// several such sections has one flag that all of them read.
type insecureFlag struct{ p *bool }

func (f *insecureFlag) String() string {
	if f == nil || f.p == nil {
		return "false"
	}
	return fmt.Sprint(*f.p)
}

func (f *insecureFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		*f.p = true
	case "false", "0", "no":
		*f.p = false
	default:
		return fmt.Errorf("want true or false")
	}
	return nil
}

func (f *insecureFlag) IsBoolFlag() bool { return true }

// InsecureFlag is the name of the flag that permits plaintext secrets off
// loopback.
const InsecureFlag = "allow-insecure"

// allowInsecure defines --allow-insecure on b's flag set, bound to
// LOYALTY_BRIDGE_ALLOW_INSECURE whatever b's prefix, or returns the one
// already defined there.
func allowInsecure(b *flagenv.Binder) *bool {
	fs := b.FlagSet()
	if f := fs.Lookup(InsecureFlag); f != nil {
		if v, ok := f.Value.(*insecureFlag); ok {
			return v.p
		}
	}
	p := new(bool)
	fs.Var(&insecureFlag{p: p}, InsecureFlag,
		"allow plaintext to hosts other than loopback: an http partner API or identity provider, registry basic auth over http, SASL PLAIN without TLS "+
			"(for test networks only); also silences the warning that Kafka without TLS carries member data unencrypted")
	b.Env(InsecureFlag, EnvPrefix+"ALLOW_INSECURE")
	return p
}

// loopback reports whether host (a name or address, without port) is this
// machine. Names are not resolved: only "localhost" and loopback literals
// count, so a DNS answer cannot turn a plaintext refusal off.
func loopback(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// plaintextURL reports whether raw is an http URL to a host off loopback.
func plaintextURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false // reported by the URL's own check
	}
	return strings.EqualFold(u.Scheme, "http") && !loopback(u.Hostname())
}
