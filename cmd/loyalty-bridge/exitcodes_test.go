package main

import (
	"strings"
	"testing"
)

// One exit-code convention for every command (docs/operating.md's table): 0 done,
// 1 it ran and something failed, 2 the command line is wrong (nothing was
// done); a flag problem is told in one line and a pointer to --help, not
// the whole help. Each case runs against kfake, srfake and the simulator,
// configured through the environment. Failures of the work itself (exit
// 1) are asserted with each command's own tests; so are api's 3 to 5.
func TestExitCodes(t *testing.T) {
	s := newReplayStack(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		// Flags that do not parse: the problem, then where help is.
		{[]string{"run", "--bogus"}, nil, 2, "loyalty-bridge run: flag provided but not defined: -bogus\nsee 'loyalty-bridge run --help'\n"},
		{[]string{"replay", "--partition", "x"}, nil, 2,
			"loyalty-bridge replay: invalid value \"x\" for flag -partition: want a whole number\nsee 'loyalty-bridge replay --help'\n"},
		{[]string{"offsets", "reset", "--nope"}, nil, 2, "loyalty-bridge offsets: flag provided but not defined: -nope\nsee 'loyalty-bridge offsets --help'\n"},
		{[]string{"schemas", "check", "--nope"}, nil, 2, "loyalty-bridge schemas: flag provided but not defined: -nope\nsee 'loyalty-bridge schemas --help'\n"},
		{[]string{"produce", "--topic"}, nil, 2, "loyalty-bridge produce: flag needs an argument: -topic\nsee 'loyalty-bridge produce --help'\n"},
		{[]string{"tail", "-y"}, nil, 2, "loyalty-bridge tail: flag provided but not defined: -y\nsee 'loyalty-bridge tail --help'\n"},
		{[]string{"api", "accrue", "--zzz"}, nil, 2, "loyalty-bridge api: flag provided but not defined: -zzz\nsee 'loyalty-bridge api accrue --help'\n"},
		{[]string{"run"}, map[string]string{"LOYALTY_BRIDGE_MAX_IN_FLIGHT": "many"}, 2,
			"loyalty-bridge run: LOYALTY_BRIDGE_MAX_IN_FLIGHT: invalid value for --max-in-flight\nsee 'loyalty-bridge run --help'\n"},
		// Values out of range, conflicts, missing flags.
		{[]string{"run", "--max-in-flight", "0"}, nil, 2, "--max-in-flight 0: must be at least 1"},
		{[]string{"schemas"}, nil, 2, "loyalty-bridge schemas: want register or check\nsee 'loyalty-bridge schemas --help'\n"},
		{[]string{"produce"}, nil, 2, "--topic is required"},
		{[]string{"tail", "--topic", "loyalty.purchase", "--max", "-1"}, nil, 2, "--max -1: must be 0 (no limit) or more"},
		{[]string{"offsets", "reset", "--topic", "loyalty.purchase", "--partition", "-1", "--to-earliest"}, nil, 2, "--partition -1: must be 0 or more"},
		{[]string{"offsets", "reset", "--topic", "loyalty.purchase", "--to-offset", "-5"}, nil, 2, "--to-offset -5: must be 0 or more"},
		{[]string{"offsets", "reset", "--topic", "loyalty.purchase", "--partition", "9", "--to-earliest"}, nil, 2, "has no partition 9"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "-1", "--from-offset", "0"}, nil, 2, "--partition -1: must be 0 or more"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--partition", "9", "--from-offset", "0"}, nil, 2, "has no partition 9"},
		// A file a setting names that cannot be used is the setting's fault.
		{[]string{"run", "--api-ca-file", "/nonexistent/ca.pem"}, nil, 2, "--api-ca-file"},
		{[]string{"replay", "--topic", "loyalty.purchase", "--since", "1h", "--kafka-tls-ca-file", "/nonexistent/ca.pem"}, nil, 2,
			"--kafka-tls-ca-file: open /nonexistent/ca.pem"},
		// It ran, and the world said no.
		{[]string{"run"}, map[string]string{"LOYALTY_BRIDGE_API_PASSWORD": "wrong"}, 1, "partner API credentials"},
		// Help is no error.
		{[]string{"run", "-h"}, nil, 0, "usage: loyalty-bridge run [flags]"},
		{[]string{"replay", "--help"}, nil, 0, "usage: loyalty-bridge replay"},
		{[]string{"offsets", "-h"}, nil, 0, "usage: loyalty-bridge offsets"},
		{[]string{"schemas", "-h"}, nil, 0, "usage: loyalty-bridge schemas register|check"},
		{[]string{"produce", "-h"}, nil, 0, "usage: loyalty-bridge produce"},
		{[]string{"tail", "-h"}, nil, 0, "usage: loyalty-bridge tail"},
		{[]string{"api", "accrue", "-h"}, nil, 0, "-loyalty-id"},
	} {
		saved := map[string]*string{}
		for k, v := range tc.env {
			old, ok := s.envs[k]
			if ok {
				saved[k] = &old
			} else {
				saved[k] = nil
			}
			s.envs[k] = v
		}
		code, _, errs := s.cli(t, tc.args...)
		for k, v := range saved {
			if v == nil {
				delete(s.envs, k)
			} else {
				s.envs[k] = *v
			}
		}
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q; stderr:\n%s", tc.args, code, tc.code, tc.want, errs)
		}
		if code == 2 && (strings.Contains(errs, "usage:") || strings.Count(errs, "\n") > 3) {
			t.Errorf("%v: a usage error printed more than its problem:\n%s", tc.args, errs)
		}
	}
}
