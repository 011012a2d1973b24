package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// RedactURL returns raw with everything that may be credentials, from
// after "scheme://" (or the start) to the last "@", replaced by "***":
// "http://svc:s3cret@registry:8081" gives "http://***@registry:8081".
// It works on text, not on a parsed URL, so that a value url.Parse refuses
// (whose error would quote it whole) is masked too; the last "@" is taken
// because a password may hold one, or a "/" or "#" that would end the
// host for a parser. A URL with an "@" further on (in its path or query)
// is masked more than it needs to be, which is the safe side. A value
// without an "@" is returned as it is.
func RedactURL(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return raw[:start] + "***" + raw[at:]
}

// checkURL checks that raw, the value of flag (such as "--auth-url"), is
// an absolute http or https URL with no credentials in it, and says where
// credentials go instead (creds, such as "--schema-registry-username and
// --schema-registry-password"). Credentials in a URL are sent as basic
// auth to whatever the URL names, over http too, and travel with the URL
// into --print-config, errors and logs. The error names the flag and shows
// raw only redacted (RedactURL): url.Parse's own error quotes the whole
// text, password included.
func checkURL(flag, raw, creds string) error {
	shown := RedactURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		// The parser's reason may quote a piece of the text (`invalid
		// port ":s3" after host`), which is a piece of the password when
		// the text holds credentials.
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(raw, "@") {
			return fmt.Errorf("%s %q: not a URL: %w", flag, shown, ue.Err)
		}
		return fmt.Errorf("%s %q: not a URL", flag, shown)
	}
	if u.User != nil {
		return fmt.Errorf("%s %q: credentials do not go in the URL (they would be sent as they are, and shown wherever the URL is); "+
			"remove them and give %s", flag, shown, creds)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: want an http:// or https:// URL with a host", flag, shown)
	}
	return nil
}
