// Package realregistry lets a test suite run against a real Schema
// Registry instead of srfake, when one is named in the environment.
//
// LOYALTY_BRIDGE_TEST_REGISTRY holds the base URL of a registry that speaks
// Confluent's REST API (scripts/registry start prints Apicurio Registry's,
// or point it at a Confluent Schema Registry of your own). Open returns it,
// or a fresh srfake when it is unset; Require skips a test that means
// something only against a real registry, such as one that needs the
// registry to refuse an incompatible schema (srfake accepts anything).
//
// A real registry outlives the test and is shared by every test in the
// run and by earlier runs, so subjects must not collide: Topics gives each
// test input topics, and so TopicNameStrategy subjects, of its own. And a
// real registry enforces compatibility where srfake does not: Force
// registers a schema whatever the subject's level says, the way a careless
// producer with compatibility turned off would.
//
// The package builds no client for the code under test: each suite does
// that with the options it tests.
package realregistry
