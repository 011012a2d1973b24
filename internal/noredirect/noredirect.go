package noredirect

import (
	"fmt"
	"net/http"
	"net/url"
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
	return &cc
}

// IsRedirect reports whether status is a 3xx answer.
func IsRedirect(status int) bool { return status >= 300 && status < 400 }

// Error describes a redirect that was not followed: its status and where
// it pointed, without user information or query (they may carry secrets).
func Error(status int, location string) error {
	where := "no Location"
	if location != "" {
		where = "Location " + safe(location)
	}
	return fmt.Errorf("redirect %d not followed (%s): the partner must answer at the configured URL", status, where)
}

func safe(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
