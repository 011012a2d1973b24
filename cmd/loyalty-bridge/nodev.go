//go:build production

package main

// addDev adds nothing: the production build has no dev command, so neither
// the embedded fake Kafka broker and registry nor the partner simulator are
// compiled into it.
func addDev(map[string]command) {}
