"""The calibrated item bank: adaptive testing (:mod:`.adapt`) and linking exam versions (:mod:`.link`).

The entry points are ``irtexam.adapt`` (:func:`irtexam.bank.adapt.adapt`) and ``irtexam.link``
(:func:`irtexam.bank.link.link`); they are not re-exported here so that the submodule names stay
importable as modules.
"""
