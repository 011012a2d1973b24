package apiendpoint_test

import (
	"context"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
)

func TestWithFrom(t *testing.T) {
	ctx := context.Background()
	if name, ok := apiendpoint.From(ctx); ok || name != "" {
		t.Errorf("bare context: %q %v", name, ok)
	}
	if name, ok := apiendpoint.From(apiendpoint.With(ctx, "")); ok || name != "" {
		t.Errorf("empty name: %q %v", name, ok)
	}
	inner := apiendpoint.With(apiendpoint.With(ctx, "token"), "point-accrual")
	if name, ok := apiendpoint.From(inner); !ok || name != "point-accrual" {
		t.Errorf("got %q %v, want the innermost name", name, ok)
	}
	type otherKey struct{}
	if name, _ := apiendpoint.From(context.WithValue(ctx, otherKey{}, "x")); name != "" {
		t.Errorf("another key's value read as a name: %q", name)
	}
}
