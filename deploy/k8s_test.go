package deploy

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// placeholderRegistry is the registry kustomization.yaml names until a
// release sets the real one. Nothing can be pulled from it (example.com is
// reserved), so an unedited kustomization fails closed.
const placeholderRegistry = "registry.example.com"

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// The bridge's image is named in deployment.yaml and placed only by
// kustomization.yaml's images entry, and there by digest: a tag can be moved
// under a running Deployment (a node that restarts a pod may pull other
// code), a digest cannot. The release pipeline runs
// `kustomize edit set image loyalty-bridge=<registry>/loyalty-bridge@sha256:…`;
// a tag is refused, and so is a real registry without a digest. Only the
// unpullable placeholder may go without one.
func TestImagePinnedByDigest(t *testing.T) {
	var (
		kust kustomization
		dep  appsv1.Deployment
	)
	strict(t, "kustomization.yaml", &kust)
	strict(t, "deployment.yaml", &dep)
	images := map[string]kustomizeImage{}
	for _, im := range kust.Images {
		images[im.Name] = im
		repo := im.NewName[strings.LastIndex(im.NewName, "/")+1:] // a registry may have a :port
		switch {
		case strings.ContainsAny(im.Name, ":@"):
			t.Errorf("images entry %q: the name is a name, without tag or digest", im.Name)
		case im.NewTag != "" || strings.ContainsAny(repo, ":@"):
			t.Errorf("images entry %s sets a tag (%q %q): pin a digest instead (kustomize edit set image %s=<registry>/%s@sha256:<digest>)", im.Name, im.NewName, im.NewTag, im.Name, im.Name)
		case im.NewName == "":
			t.Errorf("images entry %s has no newName: the image would be pulled from Docker Hub's library", im.Name)
		case im.Digest != "" && !sha256Digest.MatchString(im.Digest):
			t.Errorf("images entry %s: digest %q is not sha256:<64 hex>", im.Name, im.Digest)
		case im.Digest == "" && !strings.HasPrefix(im.NewName, placeholderRegistry+"/"):
			t.Errorf("images entry %s points at %s without a digest", im.Name, im.NewName)
		}
	}
	spec := dep.Spec.Template.Spec
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if _, ok := images[c.Image]; !ok || strings.ContainsAny(c.Image, ":@/") {
			t.Errorf("container %s: image %q is not a bare name that kustomization.yaml's images entry places and pins", c.Name, c.Image)
		}
	}
}

// nonEmpty reports whether sel selects something narrower than everything
// (an empty selector selects every pod or namespace).
func nonEmpty(sel *metav1.LabelSelector) bool {
	return sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0)
}

// namedPeer reports why peer is not a named set of pods in a named
// namespace, or "" when it is.
func namedPeer(peer networkingv1.NetworkPolicyPeer) string {
	switch {
	case peer.IPBlock != nil:
		return "is an ipBlock, not a selector"
	case !nonEmpty(peer.NamespaceSelector):
		return "names no namespace (a missing selector means this namespace, an empty one every namespace)"
	case !nonEmpty(peer.PodSelector):
		return "names no pods (every pod of the namespace)"
	}
	return ""
}

// portOf is the number of a policy port; a named port is looked up in
// names (the bridge's container ports), and is 0 when not there.
func portOf(p networkingv1.NetworkPolicyPort, names map[string]int32) int32 {
	if p.Port == nil {
		return 0
	}
	if n, err := strconv.Atoi(p.Port.String()); err == nil {
		return int32(n)
	}
	return names[p.Port.String()]
}

func protocolOf(p networkingv1.NetworkPolicyPort) corev1.Protocol {
	if p.Protocol == nil {
		return corev1.ProtocolTCP
	}
	return *p.Protocol
}

// endpoint is a destination the bridge's configuration sends it to.
type endpoint struct {
	what     string
	port     int32
	protocol corev1.Protocol
	external bool // outside the cluster: reached through an ipBlock, not selectors
}

func urlEndpoint(t *testing.T, what, raw string, external bool) endpoint {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%s: %q is not a URL", what, raw)
	}
	port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if u.Port() != "" {
		port = u.Port()
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %q has no port", what, raw)
	}
	return endpoint{what: fmt.Sprintf("%s (%s)", what, raw), port: int32(n), protocol: corev1.ProtocolTCP, external: external}
}

// The bridge's pods accept connections only from Prometheus, on the metrics
// port, and open them only to named peers on the ports the ConfigMap's
// addresses use: no rule without peers, none without ports, no selector
// that means "everything", no ipBlock that means "anywhere".
func TestNetworkPolicy(t *testing.T) {
	var (
		np  networkingv1.NetworkPolicy
		dep appsv1.Deployment
		cm  corev1.ConfigMap
	)
	strict(t, "networkpolicy.yaml", &np)
	strict(t, "deployment.yaml", &dep)
	strict(t, "configmap.yaml", &cm)

	podLabels := dep.Spec.Template.Labels
	if !nonEmpty(&np.Spec.PodSelector) {
		t.Error("the policy selects every pod of the namespace")
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("the policy selects %s=%s, which the bridge's pods do not carry", k, v)
		}
	}
	types := map[networkingv1.PolicyType]bool{}
	for _, pt := range np.Spec.PolicyTypes {
		types[pt] = true
	}
	if !types[networkingv1.PolicyTypeIngress] || !types[networkingv1.PolicyTypeEgress] {
		t.Errorf("policyTypes %v: both directions must be restricted", np.Spec.PolicyTypes)
	}

	names := map[string]int32{}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			names[p.Name] = p.ContainerPort
		}
	}
	metrics := names["metrics"]
	if metrics == 0 {
		t.Fatal("the bridge's container has no port named metrics")
	}

	if len(np.Spec.Ingress) == 0 {
		t.Error("no ingress rule: Prometheus cannot scrape the bridge")
	}
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("ingress rule %d admits every source", i)
		}
		for j, peer := range r.From {
			if why := namedPeer(peer); why != "" {
				t.Errorf("ingress rule %d, peer %d %s", i, j, why)
			}
		}
		if len(r.Ports) == 0 {
			t.Errorf("ingress rule %d opens every port", i)
		}
		for _, p := range r.Ports {
			if portOf(p, names) != metrics || p.EndPort != nil || protocolOf(p) != corev1.ProtocolTCP {
				t.Errorf("ingress rule %d opens %v/%s; only the metrics port %d/TCP is served", i, p.Port, protocolOf(p), metrics)
			}
		}
	}

	for i, r := range np.Spec.Egress {
		if len(r.To) == 0 {
			t.Errorf("egress rule %d allows every destination", i)
		}
		if len(r.Ports) == 0 {
			t.Errorf("egress rule %d allows every port", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil {
				t.Errorf("egress rule %d allows every %s port", i, protocolOf(p))
			}
		}
		for j, peer := range r.To {
			if peer.IPBlock == nil {
				if why := namedPeer(peer); why != "" {
					t.Errorf("egress rule %d, peer %d %s", i, j, why)
				}
				continue
			}
			prefix, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil {
				t.Errorf("egress rule %d, peer %d: %v", i, j, err)
			} else if prefix.Bits() == 0 {
				t.Errorf("egress rule %d, peer %d: %s is anywhere", i, j, prefix)
			}
		}
	}

	// Every address the configuration names is reachable: in-cluster ones
	// through selectors, the partner through an ipBlock.
	need := []endpoint{
		{what: "DNS", port: 53, protocol: corev1.ProtocolUDP},
		urlEndpoint(t, "LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL", cm.Data["LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL"], false),
		urlEndpoint(t, "LOYALTY_BRIDGE_API_BASE_URL", cm.Data["LOYALTY_BRIDGE_API_BASE_URL"], true),
		urlEndpoint(t, "LOYALTY_BRIDGE_API_AUTH_URL", cm.Data["LOYALTY_BRIDGE_API_AUTH_URL"], true),
	}
	for _, b := range strings.Split(cm.Data["LOYALTY_BRIDGE_BROKERS"], ",") {
		_, port, err := net.SplitHostPort(strings.TrimSpace(b))
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			t.Fatalf("LOYALTY_BRIDGE_BROKERS: %q is not host:port", b)
		}
		need = append(need, endpoint{what: "broker " + b, port: int32(n), protocol: corev1.ProtocolTCP})
	}
	for _, e := range need {
		if !allows(np.Spec.Egress, e) {
			kind := "pod and namespace selectors"
			if e.external {
				kind = "an ipBlock"
			}
			t.Errorf("no egress rule to %s on %d/%s through %s", e.what, e.port, e.protocol, kind)
		}
	}
}

// allows reports whether a rule opens e's port to peers of e's kind.
func allows(rules []networkingv1.NetworkPolicyEgressRule, e endpoint) bool {
	for _, r := range rules {
		if len(r.To) == 0 {
			continue
		}
		kind := true
		for _, peer := range r.To {
			kind = kind && (peer.IPBlock != nil) == e.external
		}
		if !kind {
			continue
		}
		for _, p := range r.Ports {
			lo := portOf(p, nil)
			hi := lo
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if protocolOf(p) == e.protocol && lo <= e.port && e.port <= hi {
				return true
			}
		}
	}
	return false
}
