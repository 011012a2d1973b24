// Package deploy holds no code: it is the home of the deployment files
// (Dockerfile, Kubernetes manifests, Keycloak realm, Prometheus alerts,
// Grafana dashboard; docker-compose.yml sits at the repository root) and of
// the tests that load every one of them with a real parser and check them
// against the bridge itself: environment variables against the variables
// `loyalty-bridge run` reads, metric names against the ones it registers,
// the realm's client and user against the simulator's defaults.
package deploy
