"""Does nothing: the module the gate stage imports, so the gate runs on its own once."""
