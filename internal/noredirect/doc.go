// Package noredirect keeps HTTP clients from following redirects.
//
// The partner API's token grants carry the client secret and the password,
// and its business calls carry personal data and signed JWTs. A client that
// follows a 307 re-sends all of it to whatever host the Location names,
// over plain http if it says so. The bridge talks only to the URLs it was
// configured with: a redirect is answered to the caller as an error that
// names the Location, and nothing is sent again.
package noredirect
