"""The dashboard's files (HTML pages, plain scripts, one style sheet), served as they are
by the management listener: no build step, no library, no external resources."""
