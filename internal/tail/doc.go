// Package tail decodes records of the bridge's topics to JSON lines: what
// an analytics team reads to see what the bridge received and answered
// (loyalty-bridge tail).
//
// Decode turns one record into a Line: its position, key, headers, schema
// id and the decoded value, or the *codec.DecodeError that says why it does
// not decode. Personal data stays out unless asked for: an onboarding's
// personal fields are redacted (events.Redacted) and the original record an
// error event carries is withheld, and Line.Withheld says so. Run polls a
// client built with ClientOpts and writes a Line, or with ValuesOnly the
// bare value that package produce reads back, per record.
//
// The package reads without a consumer group and commits nothing. It does
// not build the client's connection, produce, or call the partner API.
package tail
