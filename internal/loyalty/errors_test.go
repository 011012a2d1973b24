package loyalty

import (
	"context"
	"fmt"
	"testing"
)

// One classifier decides what the circuit hears as an API failure.
func TestIsAPIFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("accrual T-1: %w", context.Canceled), false},
		{&BusinessError{}, false},
		{&AuthError{}, false},
		{&ValidationError{}, false},
		{&TransientError{}, true},
		{fmt.Errorf("accrual T-1: %w", &TransientError{Status: 503}), true},
		{&MalformedResponseError{}, true},
		{&RejectedError{HTTPStatus: 404}, false},
		{fmt.Errorf("accrual T-1: %w", &RejectedError{HTTPStatus: 413}), false},
	} {
		if got := IsAPIFailure(tc.err); got != tc.want {
			t.Errorf("IsAPIFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
