package events

import "reflect"

// PersonalField is one personal datum: its field name in the Avro schemas
// (and in the avro and json tags of MemberOnboardRequested), and the other
// names the partner API gives the same datum in its answers.
type PersonalField struct {
	Name    string
	Aliases []string
}

// PersonalFields is the one list of personal-data fields. Everything that
// hides personal data works from it: Redact, the bridge's scrubbing of API
// texts copied into output events (internal/personalmatch, which adds the
// ID document's issueDate and expireDate), and the logger's redaction in
// internal/telemetry (which also matches the aliases, in any case and with
// or without '_', '-' or '.').
//
// Every Name is a field of MemberOnboardRequested, the only event that
// carries personal data; the aliases are the partner's names for the same
// datum in Customer Info (dateOfBirth) and Customer Profile (nationalId).
// Left out on purpose: gender, nationality, isKYC, issueDate and expireDate
// (they identify no one; String prints gender and nationality), and the ids
// records are keyed and traced by (transactionId, externalId, loyaltyId,
// partnerMemberId, memberCode). Secrets (tokens, client secret, password,
// sign) are not personal data: telemetry keeps its own list of those.
//
// It returns a new slice on each call; callers may keep or change it.
func PersonalFields() []PersonalField {
	return []PersonalField{
		{Name: "phone"},
		{Name: "fullName"},
		{Name: "firstName"},
		{Name: "lastName"},
		{Name: "email"},
		{Name: "birthday", Aliases: []string{"dateOfBirth"}},
		{Name: "placeOfBirth"},
		{Name: "idNumber", Aliases: []string{"nationalId"}},
		{Name: "passportNumber"},
		{Name: "placeOfIssue"},
		{Name: "address"},
	}
}

// PersonalFieldNames is every name of PersonalFields, aliases included, in
// list order. A new slice on each call.
func PersonalFieldNames() []string {
	var names []string
	for _, f := range PersonalFields() {
		names = append(names, f.Name)
		names = append(names, f.Aliases...)
	}
	return names
}

// PersonalData returns the values of e's personal fields (PersonalFields)
// by field name. Absent optional fields and empty values are left out.
func (e MemberOnboardRequested) PersonalData() map[string]string {
	out := map[string]string{}
	eachPersonal(&e, func(name string, f reflect.Value) {
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		if s := f.String(); s != "" {
			out[name] = s
		}
	})
	return out
}

// eachPersonal calls fn with the Avro name and the struct field (a string,
// or a non-nil *string) of every personal field present in e. The fields
// are found by their avro tags, so that the list above is the only place
// that names them.
func eachPersonal(e *MemberOnboardRequested, fn func(name string, field reflect.Value)) {
	personal := map[string]bool{}
	for _, f := range PersonalFields() {
		personal[f.Name] = true
	}
	v := reflect.ValueOf(e).Elem()
	t := v.Type()
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("avro")
		if !personal[name] {
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && f.IsNil() {
			continue
		}
		fn(name, f)
	}
}
