"""``overnight calibrate``: the drift judge measured on labelled queues."""
