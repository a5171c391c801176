"""intq.tflite — the one home of the ``.tflite`` format; the importer and the exporter both use it.

* :mod:`intq.tflite.schema`: the file identifier, tensor types <-> numpy dtypes, builtin operator
  codes <-> names, the operator versions intq reads (:data:`~intq.tflite.schema.MAX_VERSION`);
* :mod:`intq.tflite.options`: which options table each builtin reads, options <-> node attributes;
* :mod:`intq.tflite.metadata`: the ``"intq"`` model metadata entry (graph metadata, node names);
* :mod:`intq.tflite.builder`: :class:`~intq.tflite.builder.TfliteModelBuilder`, the writer;
* :mod:`intq.tflite.reader`: parsing a file and reading its tensors, buffers and operator codes;
* :mod:`intq.tflite.errors`: the errors of all of the above.

Graph construction lives elsewhere: ``.tflite`` -> Graph in :mod:`intq.frontends.from_tflite`,
Graph -> ``.tflite`` in :mod:`intq.export.tflite_writer`.
"""
