"""One typed model per resource of the API (camelCase on the wire, snake_case in Python).

The API declares them as response models (and OpenAPI documents them), the HTTP transport reads
answers into them and the SDK returns them. They depend on ``tickwheel.domain`` only."""

from tickwheel.resources.base import ItemList, Page, Resource
from tickwheel.resources.errors import ErrorBody, ErrorDetail, FieldProblem

__all__ = ["ErrorBody", "ErrorDetail", "FieldProblem", "ItemList", "Page", "Resource"]
