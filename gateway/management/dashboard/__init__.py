"""The live dashboard's files (HTML, one small script, one style sheet), served as they
are by the management listener: no build step, no external resources."""
