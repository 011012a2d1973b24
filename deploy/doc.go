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
// Images are pinned by digest. deploy/k8s/deployment.yaml names the image
// "loyalty-bridge" only; the images entry of deploy/k8s/kustomization.yaml
// places it, and a release pins it after pushing:
//
//	docker buildx imagetools inspect <registry>/loyalty-bridge:<tag>   # Digest: sha256:...
//	cd deploy/k8s && kustomize edit set image loyalty-bridge=<registry>/loyalty-bridge@sha256:<digest>
//
// The tests refuse a tag there, and any registry but the unpullable
// placeholder registry.example.com without a digest. The Dockerfile's base
// images are build arguments (GO_IMAGE, DEMO_IMAGE, RUNTIME_IMAGE) with tags
// as defaults, so a release passes name@sha256:... values; the tests refuse
// a FROM that is not one.
//
// deploy/k8s/networkpolicy.yaml names every peer the bridge's pods may talk
// to; the labels it assumes and the partner's CIDR, a placeholder, are the
// operator's to set (docs/production.md, Network policy). The tests hold it to named
// peers and to the ports the ConfigMap's addresses use.
//
// It owns no binary: the image's health probe is cmd/loyalty-healthcheck,
// built from the root module.
package deploy
