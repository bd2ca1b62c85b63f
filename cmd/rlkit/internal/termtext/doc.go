// Package termtext writes what rlkit's text reports write alike: text
// they did not choose (a path, an identity, a log's field) so that a
// terminal shows it as it is, nothing of it moving the cursor, colouring
// the screen or passing for other text (Printable); and counts, with
// thousands separators (Count, Counted).
package termtext
