# Sanitizer builds of the emulated stages: added with them (emu/README.md, "Limits").
