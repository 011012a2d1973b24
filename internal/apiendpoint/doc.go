// Package apiendpoint carries, in an HTTP request's context, the name of
// the partner API endpoint the request is for: from the code that knows it
// (internal/loyalty's client, internal/tokensource's grants) to the code
// that measures requests (internal/telemetry's transport), which therefore
// never guesses it from the URL path.
//
// The names are the spec's endpoints as the simulator counts them
// ("point-accrual", "user-profile", "token", …) and are metric label values:
// dashboards and alerts select on them. This package owns only the
// carrying; each caller owns its names (the client's endpoint table, the
// grants' Endpoint constants).
//
// It imports no other bridge package, so that the client, the grants and
// telemetry can all import it.
package apiendpoint
