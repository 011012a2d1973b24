package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// bannedFromProduction are the test doubles and test tools: no fake Kafka
// broker, no fake registry, no partner simulator, no dev stack, no testkit.
var bannedFromProduction = []string{"/kfake", "/srfake", "/internal/sim", "/internal/devstack", "/internal/demo", "/internal/testkit"}

// The production build (-tags production, as deploy/Dockerfile builds it)
// holds none of bannedFromProduction.
func TestProductionBuildHasNoDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-tags", "production", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range banned(strings.Fields(string(out))) {
		t.Errorf("the production build imports %s", pkg)
	}
}

// banned returns the packages of pkgs that bannedFromProduction names.
func banned(pkgs []string) []string {
	var found []string
	for _, pkg := range pkgs {
		for _, b := range bannedFromProduction {
			if strings.HasSuffix(pkg, b) || strings.Contains(pkg, b+"/") {
				found = append(found, pkg)
			}
		}
	}
	return found
}

// The check sees testkit in a build's dependencies: the deps of a package
// that imports it (testkit's own test build, which does) are refused, as a
// production package importing it would be.
func TestBannedCatchesTestkit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const testkit = "github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	out, err := exec.Command("go", "list", "-deps", testkit).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if got := banned(strings.Fields(string(out))); !slices.Contains(got, testkit) {
		t.Fatalf("banned(deps of testkit) = %v, want testkit among them", got)
	}
	if got := banned([]string{"github.com/loyalty-bridge/loyalty-bridge/internal/testkitten", "example.com/x/internal/testkit/sub"}); len(got) != 1 {
		t.Fatalf("banned = %v, want only the package under internal/testkit/", got)
	}
}
