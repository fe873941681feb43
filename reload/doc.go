// Package reload applies a new configuration to a running node (SIGHUP,
// POST /-/reload): it checks the whole of it first (routecfg.ForReload:
// valid, and changing nothing only a restart applies), then hands each
// part its new settings through the narrow functions the part offers,
// one reload at a time. A refused config changes nothing, and the error
// says why.
package reload
