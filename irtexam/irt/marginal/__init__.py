"""The marginal estimator (Bock-Aitkin EM over quadrature nodes, abilities integrated out), one module a part:

* :mod:`~irtexam.irt.marginal.steps`: the quadrature and the layout of the parameters, the model at the nodes,
  the E- and M-steps, the learned prior centres, the marginal log posterior (pure functions of arrays);
* :mod:`~irtexam.irt.marginal.em`: the driver (compiled kernels, the EM loop with SQUAREM, the grid refined where
  posteriors are narrow, the information and its low-rank forms);
* :mod:`~irtexam.irt.marginal.information`: marginal scores, their cross-product, Louis' identity (exact and
  low rank);
* :mod:`~irtexam.irt.marginal.guessing`: how much the responses inform the 3PL's c, and ``guessing_centre="auto"``;
* :mod:`~irtexam.irt.marginal.fit`: the :class:`~irtexam.irt.result.FitResult` (item draws, EAP / MAP abilities,
  fit statistics).

:func:`irtexam.fit` (``method="em"``, or ``"auto"`` without facets) is the entry point.
"""
