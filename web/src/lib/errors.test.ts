import { describe, expect, it } from 'vitest';
import { ApiError, errorFrom } from '../api/client';
import { problemText, withProblems } from './errors';

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), {
  status, headers: { 'Content-Type': 'application/json' } });

describe('problemText', () => {
  it('test_string_problem_is_shown_as_it_is', () => {
    expect(problemText("'name' is required (string)")).toBe("'name' is required (string)");
  });

  it('test_compile_problem_is_prefixed_with_node_and_path', () => {
    expect(problemText({ code: 'missing_field', severity: 'error', node_id: 'llm', edge_id: null,
      path: 'config.model', message: 'model is required' })).toBe('llm.config.model: model is required');
  });

  it('test_request_problem_is_named_by_its_loc', () => {
    expect(problemText({ loc: ['body', 'inputs'], message: 'Input should be a valid dictionary', code: 'dict_type' }))
      .toBe('body.inputs: Input should be a valid dictionary');
  });

  it('test_problem_without_message_falls_back_to_json', () => {
    expect(problemText({ code: 'odd' })).toBe('{"code":"odd"}');
    expect(problemText(null)).toBe('');
  });
});

describe('withProblems', () => {
  it('test_string_problems_follow_the_message', () => {
    expect(withProblems('the inputs do not fit the workflow', ["'name' is required (string)", "'age' is not a number"]))
      .toBe("the inputs do not fit the workflow: 'name' is required (string); 'age' is not a number");
  });

  it('test_object_problems_follow_the_message', () => {
    expect(withProblems('the workflow has 2 problem(s)', [
      { node_id: 'a', path: null, message: 'unknown kind' }, { node_id: null, path: 'edges[0]', message: 'dangling edge' }]))
      .toBe('the workflow has 2 problem(s): a: unknown kind; edges[0]: dangling edge');
  });

  it('test_message_without_problems_has_no_dangling_colon_nor_repeats', () => {
    expect(withProblems('the inputs do not fit the workflow:', [])).toBe('the inputs do not fit the workflow');
    expect(withProblems('the workflow has 1 problem(s); first: a: unknown kind', [{ node_id: 'a', message: 'unknown kind' }]))
      .toBe('the workflow has 1 problem(s); first: a: unknown kind');
  });
});

describe('errorFrom', () => {
  it('test_string_problems_of_a_422_reach_the_message', async () => {
    const e = await errorFrom(json(422, { error: { type: 'invalid_inputs', message: 'the inputs do not fit the workflow',
      problems: ["'name' is required (string)"] } }));
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(422);
    expect(e.message).toBe("the inputs do not fit the workflow: 'name' is required (string)");
    expect(e.summary).toBe('the inputs do not fit the workflow');
  });

  it('test_object_problems_of_a_422_reach_the_message', async () => {
    const e = await errorFrom(json(422, { error: { type: 'invalid_workflow', message: 'the workflow has 1 problem(s)',
      problems: [{ code: 'unknown_kind', severity: 'error', node_id: 'x', edge_id: null, path: 'type', message: 'no kind "foo"' }] } }));
    expect(e.message).toBe('the workflow has 1 problem(s): x.type: no kind "foo"');
    expect(e.problems).toHaveLength(1);
  });

  it('test_message_without_problems_is_unchanged', async () => {
    const e = await errorFrom(json(404, { error: { type: 'not_found', message: 'no workflow "w"' } }));
    expect(e.message).toBe('no workflow "w"');
  });
});
