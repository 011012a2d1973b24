// Package noredirect keeps HTTP clients from following redirects.
//
// The partner API's token grants carry the client secret and the password,
// and its business calls carry personal data and signed JWTs. A client that
// follows a 307 re-sends all of it to whatever host the Location names,
// over plain http if it says so. The bridge talks only to the URLs it was
// configured with: a redirect is answered to the caller as an error that
// names the Location's scheme, host and path, and nothing is sent again.
// The error shows nothing of the Location that could carry a credential
// (user information, query, fragment, an opaque part, a Location that does
// not parse), since it ends up in logs and error events.
package noredirect
