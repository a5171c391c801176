"""intq.ptq — optional post-training methods that change a float graph's weights or biases before
conversion, each measured in ``benchmarks/accuracy.py``:

* :func:`correct_biases` — bias correction for the int8 weights' expected error (Nagel et al.
  2019, with input means measured on the calibration data);
* :func:`equalize` — cross-layer equalization (Nagel et al. 2019, DFQ), before calibration;
* :func:`smooth` — SmoothQuant-style migration of activation outlier channels into the weights of
  the linear layers reading them (Xiao et al. 2022), before calibration;
* :func:`adaround` — AdaRound (Nagel et al. 2020): each weight rounded up or down to minimise its
  layer's output error on the calibration data, before calibration.
"""

from intq.ptq.adaround import adaround
from intq.ptq.bias_correction import correct_biases
from intq.ptq.equalization import equalize
from intq.ptq.smoothing import smooth

__all__ = ["adaround", "correct_biases", "equalize", "smooth"]
