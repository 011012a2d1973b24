// Package deploy holds no code: it is the home of the deployment files
// (Dockerfile, Kubernetes manifests, Keycloak realm, Prometheus alerts,
// Grafana dashboard; docker-compose.yml sits at the repository root) and of
// the tests that load every one of them with a real parser and check them
// against the bridge itself: environment variables against the variables
// `loyalty-bridge run` reads, metric names against the ones it registers,
// the realm's client and user against the simulator's defaults.
//
// It is a module of its own (github.com/loyalty-bridge/loyalty-bridge/deploy),
// so that the parsers it needs (compose-go, the Kubernetes API types,
// Prometheus's rule and PromQL parsers) are not dependencies of the bridge:
// `go test ./...` at the root neither downloads nor compiles them. Run these
// tests with `cd deploy && go test ./...`. A replace directive points the
// module at the bridge beside it, never a published version, and since Go's
// internal rule goes by import path, the tests import internal/config,
// internal/sim and internal/telemetry like any package of the bridge.
//
// It owns no binary: the image's health probe is cmd/loyalty-healthcheck,
// built from the root module.
package deploy
