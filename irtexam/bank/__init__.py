"""The calibrated item bank: adaptive testing (:mod:`.adapt`) and linking exam versions (:mod:`.link`).

The entry points are ``irtexam.adapt`` (:func:`irtexam.bank.adapt.adapt`) and ``irtexam.link``
(:func:`irtexam.bank.link.link`); they are not re-exported here so that the submodule names stay
importable as modules. The adaptive test is composed of :mod:`.itembank` (the bank), :mod:`.cat` (the
ability posterior, estimators and stopping rule) and :mod:`.select` (the item selection rules); linking
of :mod:`.scale` (the scale map and separate-calibration constants) and :mod:`.drift` (anchor drift).
"""
