// Package config is the configuration of loyalty-bridge's commands, in
// sections: Kafka (brokers, TLS, SASL, compression), Registry, Topics,
// Group, API (the partner connection, credentials, retry), Partner (the
// partner profile: what the partner answers where the spec is silent, date
// formats included), Processing, Delivery, Ledger, Parking, Ops and Tracing
// (--tracing, --tracing-sample-ratio; the OTLP exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables itself).
//
// Each section defines its flags on a flagenv.Binder (so each setting is
// also a LOYALTY_BRIDGE_* variable, a secret also a *_FILE, and a key of
// the --config YAML file), checks them in Validate (every problem at once,
// each naming its flag, never a secret's value) and builds the options of
// the package it configures. Enumerations are parsed once, into typed
// values; a bad one is reported by Validate with the rest. Defaults come
// from the packages that own them.
//
// A command composes only the sections it uses: `offsets` takes Kafka,
// Topics and Group; `api` takes API and Partner; `run`, `replay` and `dev`
// take all (Config); loyalty-sim takes Partner, to answer as it says. The API section reads the same LOYALTY_BRIDGE_API_* variable
// for a setting in every command. Every section that can carry a secret
// in the clear refuses to off loopback unless --allow-insecure is given.
// No URL setting may hold credentials (they have settings of their own,
// which are masked and may come from *_FILE); errors and --print-config
// show URLs through RedactURL. What is unsafe but common, such as Kafka
// without TLS off loopback, is a warning a section adds to the Binder's
// Warnings, which every command logs after Validate.
//
// Deployment files are checked in tests against Vars, so a manifest cannot
// set a variable that nothing reads; a test also fails when a defined
// setting is read nowhere.
package config
