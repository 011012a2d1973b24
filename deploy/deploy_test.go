package deploy

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// bridgeVars is every variable `loyalty-bridge run` reads, with the _FILE
// variants of secrets.
func bridgeVars() map[string]bool {
	out := map[string]bool{}
	for _, v := range config.Vars() {
		out[v.Name] = true
		if v.Secret {
			out[v.Name+"_FILE"] = true
		}
	}
	return out
}

func secretVars() map[string]bool {
	out := map[string]bool{}
	for _, v := range config.Vars() {
		if v.Secret {
			out[v.Name] = true
		}
	}
	return out
}

func TestComposeFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(ctx, composetypes.ConfigDetails{WorkingDir: root,
		ConfigFiles: []composetypes.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: map[string]string{}}, func(o *loader.Options) { o.SetProjectName("loyalty-bridge", true) })
	if err != nil {
		t.Fatalf("compose file: %v", err)
	}
	for _, name := range []string{"kafka", "schema-registry", "keycloak", "loyalty-sim", "init-topics", "init-schemas", "bridge", "demo"} {
		if _, err := p.GetService(name); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	vars := bridgeVars()
	for _, s := range p.Services {
		for k := range s.Environment {
			if strings.HasPrefix(k, "LOYALTY_BRIDGE_") && !vars[k] {
				t.Errorf("service %s sets %s, which loyalty-bridge does not read", s.Name, k)
			}
		}
		if s.Build != nil && s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("service %s builds from %s", s.Name, s.Build.Dockerfile)
		}
	}
	for _, name := range []string{"kafka", "schema-registry", "keycloak", "loyalty-sim", "bridge"} {
		if s, _ := p.GetService(name); s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("service %s has no health check", name)
		}
	}
	// What the image's services run, entry point and health check, is a
	// program the image carries.
	built := readDockerfile(t).binaries()
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		var run []string
		if len(s.Entrypoint) > 0 {
			run = append(run, s.Entrypoint[0])
		}
		if s.HealthCheck != nil && len(s.HealthCheck.Test) > 1 && s.HealthCheck.Test[0] == "CMD" {
			run = append(run, s.HealthCheck.Test[1])
		}
		for _, r := range run {
			if bin, ok := strings.CutPrefix(r, "/usr/local/bin/"); ok && !slices.Contains(built, bin) {
				t.Errorf("service %s runs %s, which the image does not carry (it builds %v)", s.Name, r, built)
			}
		}
	}
	bridge, _ := p.GetService("bridge")
	for dep, cond := range map[string]string{"init-topics": "service_completed_successfully", "init-schemas": "service_completed_successfully",
		"loyalty-sim": "service_healthy", "kafka": "service_healthy", "schema-registry": "service_healthy"} {
		if d, ok := bridge.DependsOn[dep]; !ok || d.Condition != cond {
			t.Errorf("bridge depends on %s: %+v, want condition %s", dep, d, cond)
		}
	}
	// Nothing is published beyond the host: plaintext Kafka and demo
	// credentials are for this machine.
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %s on %q, not 127.0.0.1", s.Name, port.Published, port.HostIP)
			}
		}
	}
	if _, ok := p.Volumes["kafka-data"]; !ok {
		t.Error("no named volume for Kafka's data")
	}
	// Secrets come from files, and the demo files hold the simulator's
	// demo values.
	for name, want := range map[string]string{"partner-client-secret": sim.DefaultClientSecret, "partner-password": sim.DefaultPassword} {
		sec, ok := p.Secrets[name]
		if !ok {
			t.Errorf("no compose secret %s", name)
			continue
		}
		data, err := os.ReadFile(sec.File)
		if err != nil || strings.TrimSpace(string(data)) != want {
			t.Errorf("secret %s file %s: %v", name, sec.File, err)
		}
	}
	for k := range bridge.Environment {
		if secretVars()[k] {
			t.Errorf("bridge takes the secret %s from the environment; use %s_FILE", k, k)
		}
	}
	// The demo's event files exist.
	demo, err := os.ReadFile("compose/demo/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\b([a-z]+\.jsonl)\b`).FindAllStringSubmatch(string(demo), -1) {
		if _, err := os.Stat(filepath.Join("compose/demo/events", m[1])); err != nil {
			t.Errorf("demo.sh sends %s: %v", m[1], err)
		}
	}
	// The realm Keycloak imports matches the simulator's demo credentials.
	kc, _ := p.GetService("keycloak")
	if !slices.Contains(kc.Command, "--import-realm") {
		t.Errorf("keycloak does not import the realm: %v", kc.Command)
	}
}

func TestKeycloakRealmMatchesSimulator(t *testing.T) {
	data, err := os.ReadFile("keycloak/loyalty-partner-realm.json")
	if err != nil {
		t.Fatal(err)
	}
	var realm struct {
		Realm   string `json:"realm"`
		Clients []struct {
			ClientID                  string `json:"clientId"`
			Secret                    string `json:"secret"`
			DirectAccessGrantsEnabled bool   `json:"directAccessGrantsEnabled"`
		} `json:"clients"`
		Users []struct {
			Username    string `json:"username"`
			Credentials []struct {
				Value string `json:"value"`
			} `json:"credentials"`
		} `json:"users"`
	}
	if err := json.Unmarshal(data, &realm); err != nil {
		t.Fatal(err)
	}
	if realm.Realm != "loyalty-partner" || len(realm.Clients) != 1 || len(realm.Users) != 1 {
		t.Fatalf("realm: %+v", realm)
	}
	c, u := realm.Clients[0], realm.Users[0]
	if c.ClientID != sim.DefaultClientID || c.Secret != sim.DefaultClientSecret || !c.DirectAccessGrantsEnabled {
		t.Errorf("client %+v does not match the simulator's defaults", c)
	}
	if u.Username != sim.DefaultUsername || len(u.Credentials) != 1 || u.Credentials[0].Value != sim.DefaultPassword {
		t.Errorf("user %s does not match the simulator's defaults", u.Username)
	}
}

// strict decodes a manifest into its API type, rejecting unknown fields.
func strict(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("k8s", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// kustomization is what kustomization.yaml may hold; strict decoding makes
// any other field an error.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace"`
	Labels     []any            `json:"labels"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images"`
}

// kustomizeImage is an images entry, as `kustomize edit set image` writes
// it.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
}

func TestKubernetesManifests(t *testing.T) {
	var kust kustomization
	strict(t, "kustomization.yaml", &kust)
	files, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range files {
		base := filepath.Base(f)
		switch {
		case base == "kustomization.yaml":
		case base == "secret.example.yaml":
			if slices.Contains(kust.Resources, base) {
				t.Error("kustomization.yaml applies the Secret template, which would overwrite the real Secret")
			}
		case !slices.Contains(kust.Resources, base):
			t.Errorf("%s is not listed in kustomization.yaml", base)
		}
	}
	var (
		ns     corev1.Namespace
		cm     corev1.ConfigMap
		secret corev1.Secret
		dep    appsv1.Deployment
		svc    corev1.Service
		pdb    policyv1.PodDisruptionBudget
		hpa    autoscalingv2.HorizontalPodAutoscaler
		np     networkingv1.NetworkPolicy
	)
	for file, obj := range map[string]any{"namespace.yaml": &ns, "configmap.yaml": &cm, "secret.example.yaml": &secret,
		"deployment.yaml": &dep, "service.yaml": &svc, "pdb.yaml": &pdb, "hpa.yaml": &hpa, "networkpolicy.yaml": &np} {
		if !slices.Contains(kust.Resources, file) && file != "secret.example.yaml" {
			t.Errorf("kustomization.yaml does not list %s", file)
		}
		strict(t, file, obj)
	}
	vars, secrets := bridgeVars(), secretVars()
	for k := range cm.Data {
		if !vars[k] {
			t.Errorf("ConfigMap sets %s, which loyalty-bridge does not read", k)
		}
		if secrets[k] {
			t.Errorf("ConfigMap carries the secret %s", k)
		}
	}
	for k, v := range secret.StringData {
		if v != "REPLACE_ME" {
			t.Errorf("the Secret template holds a value for %s", k)
		}
	}
	for k, v := range cm.Data {
		if strings.HasSuffix(k, "_FILE") && secrets[strings.TrimSuffix(k, "_FILE")] {
			key := strings.TrimPrefix(v, "/etc/loyalty-bridge/secrets/")
			if _, ok := secret.StringData[key]; !ok || key == v {
				t.Errorf("%s points at %s, not a key of the mounted Secret", k, v)
			}
		}
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one container")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		if secrets[e.Name] {
			t.Errorf("secret %s is in the environment; mount the Secret and use %s_FILE", e.Name, e.Name)
		}
		if !vars[e.Name] {
			t.Errorf("Deployment sets %s, which loyalty-bridge does not read", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			if _, ok := secret.StringData[e.ValueFrom.SecretKeyRef.Key]; !ok {
				t.Errorf("%s refers to key %s the Secret template lacks", e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("liveness probe is not /healthz")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("readiness probe is not /readyz")
	}
	if len(c.Ports) == 0 || c.Ports[0].ContainerPort != 9464 || !strings.HasSuffix(cm.Data["LOYALTY_BRIDGE_METRICS_ADDR"], ":9464") {
		t.Error("metrics port and --metrics-addr disagree")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("resources not set")
	}
	drain, _ := time.ParseDuration(cm.Data["LOYALTY_BRIDGE_DRAIN_TIMEOUT"])
	shutdown, _ := time.ParseDuration(cm.Data["LOYALTY_BRIDGE_SHUTDOWN_TIMEOUT"])
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain+shutdown {
		t.Errorf("terminationGracePeriodSeconds must exceed drain (%s) + shutdown (%s) timeouts", drain, shutdown)
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod may run as root")
	}
	// The mounted secrets must be readable by the bridge's user: group-owned
	// through fsGroup, with group read.
	spec := dep.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
		t.Error("no fsGroup matching the bridge's group: the secret files are root's")
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o040 == 0 || *v.Secret.DefaultMode&0o007 != 0) {
			t.Errorf("secret volume %s: mode must give the group read and others nothing", v.Name)
		}
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Error("the container may write its root file system, escalate privileges or hold capabilities")
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the service-account token is mounted; the bridge calls no Kubernetes API")
	}
	if len(hpa.Spec.Metrics) == 0 || hpa.Spec.Metrics[0].External == nil || !registered(t)[hpa.Spec.Metrics[0].External.Metric.Name] {
		t.Error("HPA does not scale on a metric the bridge exports")
	}
	if svc.Spec.Ports[0].Port != 9464 || pdb.Spec.MaxUnavailable == nil || len(np.Spec.PolicyTypes) != 2 {
		t.Error("service, PDB or network policy incomplete")
	}
}

// registered is every metric family name the bridge registers, with the
// series suffixes of histograms. A vector is gathered only once it has a
// child, so each gets one.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	m := telemetry.NewMetrics()
	m.RecordsConsumed.WithLabelValues("t")
	m.RecordsCompleted.WithLabelValues("t", "APPLIED")
	m.ErrorEvents.WithLabelValues("t", "DECODE")
	m.APICalls.WithLabelValues("e", "200")
	m.APILatency.WithLabelValues("e").Observe(1)
	m.APIRetries.WithLabelValues("e")
	m.GuardLookups.WithLabelValues("found")
	m.AlreadyApplied.WithLabelValues("t")
	m.RefundKeyMismatches.WithLabelValues("t", "refused")
	m.TokenRefreshes.WithLabelValues("ok")
	m.CommittedOffset.WithLabelValues("t", "0")
	m.Lag.WithLabelValues("t", "0")
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[mf.GetName()+suffix] = true
			}
		}
	}
	return out
}

func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(data, false, model.UTF8Validation)
	if len(errs) > 0 {
		t.Fatalf("alert rules: %v", errs)
	}
	known := registered(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			for _, n := range metricNames(t, r.Expr) {
				if !known[n] {
					t.Errorf("alert %s uses %s, which the bridge does not export", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"LoyaltyBridgeLagGrowing", "LoyaltyBridgeErrorEvents", "LoyaltyBridgeCircuitOpen",
		"LoyaltyBridgeTokenRefreshFailing", "LoyaltyBridgeCredentialsRefused", "LoyaltyBridgeUnrecognisedAnswersHeld", "LoyaltyBridgeNoProgress"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/loyalty-bridge.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	known := registered(t)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricNames(t, tg.Expr) {
				n++
				if !known[name] {
					t.Errorf("panel %q uses %s, which the bridge does not export", p.Title, name)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d metric references in the dashboard", n)
	}
}

// dockerfile is what the tests read of deploy/Dockerfile. There is no
// Docker engine here and no Dockerfile parser among the dependencies: a
// line-level reading of what matters, continuation lines joined.
type dockerfile struct {
	text   string
	args   map[string]string // global ARGs (before the first FROM) and their defaults
	stages []dockerStage
	user   string   // the last USER
	builds []string // the packages `go build` is given, as written (./cmd/x)
	tags   []string // its -tags
}

type dockerStage struct {
	from   string   // as written, e.g. ${RUNTIME_IMAGE}
	name   string   // after AS
	copies []string // sources of its COPY --from=<stage> instructions
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{text: string(data), args: map[string]string{}}
	var instructions []string
	cont := ""
	for _, line := range strings.Split(d.text, "\n") {
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cont += l + " "
			continue
		}
		instructions = append(instructions, cont+line)
		cont = ""
	}
	for _, in := range instructions {
		f := strings.Fields(in)
		switch strings.ToUpper(f[0]) {
		case "ARG":
			if len(d.stages) == 0 {
				name, def, _ := strings.Cut(f[1], "=")
				d.args[name] = def
			}
		case "FROM":
			st := dockerStage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				st.name = f[3]
			}
			d.stages = append(d.stages, st)
		case "USER":
			d.user = f[1]
		case "COPY":
			if len(d.stages) > 0 && len(f) > 3 && strings.HasPrefix(f[1], "--from=") {
				st := &d.stages[len(d.stages)-1]
				st.copies = append(st.copies, f[2:len(f)-1]...)
			}
		case "RUN":
			if i := slices.Index(f, "build"); i > 0 && f[i-1] == "go" {
				args := f[i+1:]
				for j, a := range args {
					switch {
					case strings.HasPrefix(a, "./"):
						d.builds = append(d.builds, a)
					case a == "-tags" && j+1 < len(args):
						d.tags = append(d.tags, strings.Split(args[j+1], ",")...)
					case strings.HasPrefix(a, "-tags="):
						d.tags = append(d.tags, strings.Split(strings.TrimPrefix(a, "-tags="), ",")...)
					}
				}
			}
		}
	}
	return d
}

// binaries is the names of the programs the image carries: go build -o
// dir/ names each after its package's directory.
func (d dockerfile) binaries() []string {
	var out []string
	for _, b := range d.builds {
		out = append(out, path.Base(b))
	}
	return out
}

// argRef matches a FROM that is a build argument and nothing else.
var argRef = regexp.MustCompile(`^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$`)

func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("not multi-stage: %v", d.stages)
	}
	// Every base image is a build argument, so that a release build pins
	// it by digest (--build-arg RUNTIME_IMAGE=...@sha256:...) without
	// editing the file; a stage may start from an earlier stage.
	base := make([]string, len(d.stages)) // each stage's image, defaults filled in
	for i, st := range d.stages {
		if j := slices.IndexFunc(d.stages[:i], func(e dockerStage) bool { return e.name == st.from }); j >= 0 {
			base[i] = base[j]
			continue
		}
		m := argRef.FindStringSubmatch(st.from)
		if m == nil {
			t.Errorf("FROM %s: base images are build arguments (ARG X_IMAGE=... before the first FROM, FROM ${X_IMAGE})", st.from)
			base[i] = st.from
		} else if def := d.args[m[1]]; def == "" {
			t.Errorf("FROM %s: no global ARG %s with a default", st.from, m[1])
		} else {
			base[i] = def
		}
	}
	if last := base[len(base)-1]; !strings.Contains(last, "distroless/static") {
		t.Errorf("final stage %s is not a static minimal base", last)
	}
	if d.user == "" || strings.HasPrefix(d.user, "0") || d.user == "root" {
		t.Errorf("runs as %q", d.user)
	}
	if !strings.Contains(d.text, "CGO_ENABLED=0") {
		t.Error("binaries are not static")
	}
	// cmd/loyalty-bridge's build_test.go checks what the tag leaves out.
	if !slices.Contains(d.tags, "production") {
		t.Errorf("go build without -tags production (tags %v): the image's bridge would carry the dev stack", d.tags)
	}
	for _, cmd := range []string{"./cmd/loyalty-bridge", "./cmd/loyalty-sim", "./cmd/loyalty-healthcheck"} {
		if !slices.Contains(d.builds, cmd) {
			t.Errorf("%s not built (go build %v)", cmd, d.builds)
		}
	}
	// The production image carries the bridge and its probe, named one by
	// one: not the simulator, not a whole output directory.
	runtime := d.stages[len(d.stages)-1]
	want := []string{"/out/loyalty-bridge", "/out/loyalty-healthcheck"}
	if !slices.Equal(runtime.copies, want) {
		t.Errorf("the final stage copies %v, want exactly %v", runtime.copies, want)
	}
}
