package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"2xx", []string{srv.URL + "/readyz"}, 0},
		{"503", []string{srv.URL + "/other"}, 1},
		{"refused", []string{"--timeout", "1s", closed.URL}, 1},
		{"no URL", nil, 2},
		{"two URLs", []string{srv.URL, srv.URL}, 2},
		{"bad flag", []string{"--nope", srv.URL}, 2},
		{"bad URL", []string{"::"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(tc.args, io.Discard); got != tc.want {
				t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
			}
		})
	}
}
