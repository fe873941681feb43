// Command demo-upstream runs the bundled fault-injectable demo API that
// `make run` puts behind a Levee cluster. See package demoupstream.
package main
