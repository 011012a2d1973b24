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
		// Register, then look the version up: two requests. CreateSchema
		// would ask for every subject and version holding the id, one
		// request each, and the bridge's result and error schemas are held
		// by three subjects each, or by many more in a shared registry.
		sch := sr.Schema{Schema: s.Schema, Type: sr.TypeAvro}
		_, err := cl.RegisterSchema(ctx, s.Subject, sch, -1, -1)
		var ss sr.SubjectSchema
		if err == nil {
			ss, err = cl.LookupSchema(ctx, s.Subject, sch)
		}
		if err != nil {
			if r := refused(err); r != nil {
				err = r
			}
			return out, fmt.Errorf("register %s (the %s schema): %w", s.Subject, s.Contract, err)
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
	problems := localCheck(ours, versions, level)
	version := -1
	if transitive(level) {
		version = -2
	}
	res, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), s.Subject, version, sr.Schema{Schema: s.Schema, Type: sr.TypeAvro})
	if err != nil {
		return nil, err
	}
	if res.Is {
		return problems, nil
	}
	// Confluent's registry gives reasons when asked to be verbose;
	// Apicurio's gives none.
	msg := "the registry says incompatible"
	if len(res.Messages) > 0 {
		msg += ": " + strings.Join(res.Messages, "; ")
	}
	return append(problems, msg), nil
}

func transitive(level sr.CompatibilityLevel) bool {
	return level == sr.CompatBackwardTransitive || level == sr.CompatForwardTransitive || level == sr.CompatFullTransitive
}

// localCheck says why ours may not follow versions under level, naming
// versions and fields.
func localCheck(ours avro.Schema, versions []sr.SubjectSchema, level sr.CompatibilityLevel) []string {
	var against []sr.SubjectSchema
	switch {
	case level == sr.CompatNone:
	case transitive(level):
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
				problems = append(problems, fmt.Sprintf("%s: ours cannot read data written with version %d: %s%v", level, v.Version, where(compat, ours, theirs), err))
			}
		}
		if forward {
			if err := compat.Compatible(theirs, ours); err != nil {
				problems = append(problems, fmt.Sprintf("%s: readers of version %d cannot read ours: %s%v", level, v.Version, where(compat, theirs, ours), err))
			}
		}
	}
	return problems
}

// where names the first field that keeps reader from reading writer's data
// ("field amount: "), one union branch deep, or returns "": hamba's
// verdict names types, not fields, and some registries (Apicurio) give a
// JSON path of indices or nothing at all.
func where(compat *avro.SchemaCompatibility, reader, writer avro.Schema) string {
	rr, rok := reader.(*avro.RecordSchema)
	wr, wok := writer.(*avro.RecordSchema)
	if rok && wok {
		return fieldOf(compat, rr, wr)
	}
	ru, rok := reader.(*avro.UnionSchema)
	wu, wok := writer.(*avro.UnionSchema)
	if !rok || !wok {
		return ""
	}
	for _, rt := range ru.Types() {
		rr, ok := rt.(*avro.RecordSchema)
		if !ok {
			continue
		}
		for _, wt := range wu.Types() {
			if wr, ok := wt.(*avro.RecordSchema); ok && wr.FullName() == rr.FullName() {
				if f := fieldOf(compat, rr, wr); f != "" {
					return rr.Name() + " " + f
				}
			}
		}
	}
	return ""
}

func fieldOf(compat *avro.SchemaCompatibility, reader, writer *avro.RecordSchema) string {
	written := map[string]*avro.Field{}
	for _, f := range writer.Fields() {
		written[f.Name()] = f
	}
	for _, rf := range reader.Fields() {
		wf := written[rf.Name()]
		for _, a := range rf.Aliases() {
			if wf == nil {
				wf = written[a]
			}
		}
		switch {
		case wf == nil && !rf.HasDefault():
			return fmt.Sprintf("field %s (not written, no default): ", rf.Name())
		case wf != nil && compat.Compatible(rf.Type(), wf.Type()) != nil:
			return fmt.Sprintf("field %s: ", rf.Name())
		}
	}
	return ""
}
