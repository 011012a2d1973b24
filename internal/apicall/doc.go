// Package apicall calls one partner API endpoint by name, its request built
// from flags and an optional JSON body: the calls of `loyalty-bridge api`
// (token, profile, profile-ext, onboard, link, unlink, accrue, redeem,
// lookup), and sign --explain, which calls nothing and prints the claims
// the partner profile puts in a sign and a partner token.
//
// Calls lists them. A Call's Define puts its request flags on a flag set
// and returns the Func that, once the set is parsed, builds the request (a
// JSON body first, then every flag given on the command line over it, and
// flags not given only where the body left a field empty), makes the call
// through a Conn and returns the answer to print. A request that cannot be
// built is a *UsageError; everything else is the client's typed error
// (package loyalty), the token call's included.
//
// The package does not build the client (internal/config does), read
// configuration, print, or choose exit codes: the command does. The only
// input it reads is a request body, when asked (ReadBody). It never
// returns or prints a token or secret.
package apicall
