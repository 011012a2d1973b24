package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The production build (-tags production, as deploy/Dockerfile builds it)
// holds no test doubles: no fake Kafka broker, no fake registry, no
// partner simulator, no dev stack.
func TestProductionBuildHasNoDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-tags", "production", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"/kfake", "/srfake", "/internal/sim", "/internal/devstack", "/internal/demo"} {
			if strings.HasSuffix(pkg, banned) || strings.Contains(pkg, banned+"/") {
				t.Errorf("the production build imports %s", pkg)
			}
		}
	}
}
