package noredirect

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Client returns a shallow copy of c (http.DefaultClient if nil) that does
// not follow redirects: Do returns the 3xx response itself. The copy shares
// c's Transport, so connection pools are not duplicated.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rt := cc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if _, ok := rt.(guard); !ok {
		cc.Transport = guard{rt}
	}
	return &cc
}

// unparsable replaces a Location that does not parse (see guard).
const unparsable = "urn:x-noredirect:unparsable"

// guard replaces a 3xx answer's Location that does not parse. net/http
// parses a redirect's Location before it asks CheckRedirect, and when that
// fails Do returns no response but an error that quotes the whole Location,
// credentials and all.
type guard struct{ rt http.RoundTripper }

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.rt.RoundTrip(req)
	if err != nil || !IsRedirect(resp.StatusCode) {
		return resp, err
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		if _, perr := req.URL.Parse(loc); perr != nil {
			resp.Header.Set("Location", unparsable)
		}
	}
	return resp, nil
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on.
func (g guard) CloseIdleConnections() {
	if c, ok := g.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// IsRedirect reports whether status is a 3xx answer.
func IsRedirect(status int) bool { return status >= 300 && status < 400 }

// Error describes a redirect that was not followed: its status and where
// it pointed (see where), never anything of the Location that may carry a
// secret.
func Error(status int, location string) error {
	shown := "no Location"
	if location != "" {
		shown = "Location " + where(location)
	}
	return fmt.Errorf("redirect %d not followed (%s): the partner must answer at the configured URL", status, shown)
}

// maxWhere bounds what where returns: the Location is the server's text.
const maxWhere = 200

// where is what may be shown of a Location header: an http or https
// scheme, the host and the path. User information, query and fragment are
// dropped, and so is everything that could hide them where the URL parser
// does not look for them: the opaque part (https:user:pw@host parses as
// scheme https and opaque "user:pw@host"), a path with an @ in it
// (https:/user:pw@host has no host, only a path), and a scheme other than
// http or https (user:pw@host parses as scheme "user"). An unparsable
// Location is not shown at all.
func where(location string) string {
	u, err := url.Parse(location)
	switch {
	case err != nil, location == unparsable:
		return "(unparsable, not shown)"
	case u.Opaque != "":
		return "(opaque, not shown)"
	}
	var b strings.Builder
	switch s := strings.ToLower(u.Scheme); s {
	case "":
	case "http", "https":
		b.WriteString(s + ":")
	default:
		b.WriteString("(other scheme):")
	}
	if u.Host != "" {
		b.WriteString("//" + u.Host)
	}
	if strings.Contains(u.Path, "@") {
		b.WriteString("/(path not shown)")
	} else {
		b.WriteString(u.EscapedPath())
	}
	s := b.String()
	if len(s) > maxWhere {
		s = strings.ToValidUTF8(s[:maxWhere], "") + "…"
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
