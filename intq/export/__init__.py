"""intq.export — write integer graphs as files real runtimes run: ``.tflite``
(:mod:`intq.export.tflite_writer`; the format itself lives in :mod:`intq.tflite`)."""
