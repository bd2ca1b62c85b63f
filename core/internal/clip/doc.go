// Package clip shortens the values that error messages quote, so that the
// message about a megabyte-long value is not megabytes long.
//
// String keeps at most the first Max (64) bytes of a value, never cutting
// a character in two, and marks the cut with "…"; a value no longer than
// Max is quoted whole. The parsers of core (configuration files, limits
// such as "10/minute") quote what they refuse through it.
package clip
