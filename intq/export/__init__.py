"""Writing intq models as LiteRT ``.tflite`` flatbuffers, and running them under LiteRT."""
