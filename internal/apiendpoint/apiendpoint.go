package apiendpoint

import "context"

// key is the context key of the endpoint name; unexported, so that only
// With sets it.
type key struct{}

// With returns a copy of ctx that names the endpoint a request made with it
// is for.
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// From returns the endpoint name ctx carries, and whether it carries one
// (a non-empty name).
func From(ctx context.Context) (string, bool) {
	name, _ := ctx.Value(key{}).(string)
	return name, name != ""
}
