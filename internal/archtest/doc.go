// Package archtest holds the test that enforces the package dependency rules
// of ARCHITECTURE.md §7. It has no code of its own.
package archtest
