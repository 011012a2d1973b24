// Package config is the configuration of `loyalty-bridge run`: every
// setting, its flag, its LOYALTY_BRIDGE_* variable (secrets also *_FILE),
// its YAML key (the flag name), its default, and the checks that run before
// anything connects.
//
// The partner API connection reads the same LOYALTY_BRIDGE_API_* variables
// as the `api` command, so one environment configures both. Validate
// reports every problem at once, each naming its flag; KafkaOpts turns the
// Kafka settings (TLS, SASL) into franz-go options and fails, naming the
// flag, on unreadable files. Deployment files are checked in tests against
// Vars, so a manifest cannot set a variable that nothing reads.
package config
