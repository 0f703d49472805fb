// Package archcheck holds no code: its test checks what docs/ARCHITECTURE.md and
// shared habits claim of the code itself (who imports whom, the one caller of stores.IsURL,
// option names only in the schema, files and functions within their sizes), so a change
// that breaks a claim fails `make test` instead of leaving the document wrong.
package archcheck
