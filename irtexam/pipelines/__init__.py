"""RAG pipelines (llm x retriever x icl) taking an exam: prompts, demonstrations, the grid."""

from .icl import draw_demonstrations, eligible_demonstrations
from .prompt import PromptTemplate
from .spec import GridSpec, SpecError, load_spec, parse_spec
from .take import Pipeline, TakeResult, accuracy_table, take_exam

__all__ = ["draw_demonstrations", "eligible_demonstrations", "PromptTemplate", "GridSpec", "SpecError",
           "load_spec", "parse_spec", "Pipeline", "TakeResult", "accuracy_table", "take_exam"]
