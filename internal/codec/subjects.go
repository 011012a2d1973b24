package codec

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Registered is a subject Register wrote the bridge's schema under.
type Registered struct {
	SubjectTopic
	ID, Version int
}

// Register registers the bridge's schema under every subject of t, in
// SubjectsOf order (registering a schema a subject already has is a no-op
// that returns its id). It stops at the first failure and returns what it
// registered before it.
func Register(ctx context.Context, cl *sr.Client, t Topics) ([]Registered, error) {
	var out []Registered
	for _, s := range SubjectsOf(t) {
		ss, err := cl.CreateSchema(ctx, s.Subject, sr.Schema{Schema: s.Schema, Type: sr.TypeAvro})
		if err != nil {
			return out, fmt.Errorf("register %s: %w", s.Subject, err)
		}
		out = append(out, Registered{SubjectTopic: s, ID: ss.ID, Version: ss.Version})
	}
	return out, nil
}

// Check returns why the bridge's schema for s may not be registered as the
// next version of s (nil: it may): the registry's own verdict plus a local
// check under the subject's compatibility level, which names the field
// (some registries, and test fakes, answer only yes or no). A subject the
// registry does not have accepts anything.
func Check(ctx context.Context, cl *sr.Client, s SubjectTopic) ([]string, error) {
	problems, err := check(ctx, cl, s)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", s.Subject, err)
	}
	return problems, nil
}

func check(ctx context.Context, cl *sr.Client, s SubjectTopic) ([]string, error) {
	ours, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	versions, err := cl.Schemas(ctx, s.Subject)
	var re *sr.ResponseError
	if errors.As(err, &re) && sr.IsNotFoundError(re.ErrorCode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, nil
	}
	level := sr.CompatBackward
	if res := cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), s.Subject); len(res) == 1 && res[0].Err == nil {
		level = res[0].Level
	}
	var against []sr.SubjectSchema
	switch level {
	case sr.CompatNone:
	case sr.CompatBackwardTransitive, sr.CompatForwardTransitive, sr.CompatFullTransitive:
		against = versions
	default:
		against = versions[len(versions)-1:]
	}
	backward := level == sr.CompatBackward || level == sr.CompatBackwardTransitive || level == sr.CompatFull || level == sr.CompatFullTransitive
	forward := level == sr.CompatForward || level == sr.CompatForwardTransitive || level == sr.CompatFull || level == sr.CompatFullTransitive
	var problems []string
	compat := avro.NewSchemaCompatibility()
	for _, v := range against {
		theirs, err := avro.ParseWithCache(v.Schema.Schema, "", &avro.SchemaCache{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("version %d does not parse: %v", v.Version, err))
			continue
		}
		if backward {
			if err := compat.Compatible(ours, theirs); err != nil {
				problems = append(problems, fmt.Sprintf("%s: ours cannot read data written with version %d: %v", level, v.Version, err))
			}
		}
		if forward {
			if err := compat.Compatible(theirs, ours); err != nil {
				problems = append(problems, fmt.Sprintf("%s: readers of version %d cannot read ours: %v", level, v.Version, err))
			}
		}
	}
	version := -1
	if level == sr.CompatBackwardTransitive || level == sr.CompatForwardTransitive || level == sr.CompatFullTransitive {
		version = -2
	}
	res, err := cl.CheckCompatibility(ctx, s.Subject, version, sr.Schema{Schema: s.Schema, Type: sr.TypeAvro})
	if err != nil {
		return nil, err
	}
	if !res.Is {
		msg := "the registry says incompatible"
		if len(res.Messages) > 0 {
			msg += ": " + strings.Join(res.Messages, "; ")
		}
		problems = append(problems, msg)
	}
	return problems, nil
}
