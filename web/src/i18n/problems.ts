/**
 * The compiler's problems in the UI's other languages: the server's messages are English
 * and keyed by a stable `code` (engine/errors.py), so the canvas words each code itself,
 * with the problem's place (node title, field label in that language) and the names the
 * English message quotes ('x'). English shows the server's message as it is.
 *
 * A template's parameters: `{node}` the node's title, `{field}` the field's label,
 * `{q0}`, `{q1}`... the message's quoted names in order, `{n0}`, `{n1}`... its numbers,
 * `{quoted}` every quoted name, comma-separated. `invalid_config` and
 * `invalid_document` carry a field validator's words, matched by their fixed English
 * phrasing (engine/plain_errors.py) in {@link ZH_CN_DETAILS}, first match wins.
 */

/** Code -> template (Simplified Chinese). A code not here gets {@link ZH_CN_FALLBACK}. */
export const ZH_CN_PROBLEMS: Readonly<Record<string, string>> = {
  invalid_document: '工作流文档无效：{detail}',
  document_too_deep: '文档嵌套层级过深（上限 {n0} 层）',
  document_too_large: '文档过大（至少 {n0} 字节，上限 {n1} 字节）',
  too_many_nodes: '节点过多：{n0} 个（上限 {n1} 个）',
  too_long: '「{field}」过长：{n0} 个字符（上限 {n2}）',
  unknown_kind: '未知的节点类型 {q0}',
  missing_config: '缺少必填字段「{field}」',
  invalid_config: '「{field}」{detail}',
  empty_required: '「{field}」为必填项，不能为空',
  duplicate_node_id: '节点 ID {q0} 重复使用',
  reserved_node_id: '节点 ID {q0} 是保留名称，请重命名该节点',
  duplicate_edge_id: '连线 ID {q0} 重复使用',
  no_start: '工作流没有开始节点，请添加一个',
  multiple_start: '只能有一个开始节点',
  dangling_edge: '连线指向不存在的节点 {quoted}',
  edge_crosses_container: '连线连接了不同循环体中的节点 {q0} 和 {q1}，请改为连接循环节点本身',
  unknown_handle: '节点 {q0} 没有输出分支 {q1}',
  edge_into_start: '开始节点不能有输入连线',
  invalid_default_output: '默认输出无效：{quoted}',
  unknown_default_handle: '默认分支 {q0} 不存在',
  unknown_model: '模型 {q0} 不在模型列表中',
  unknown_parent: '父节点 {q0} 不是容器节点',
  loop_break_outside_loop: '此节点必须放在循环或批量执行节点的循环体内',
  interrupt_in_loop: '需要用户回答的节点不能放在循环体内，请在循环之前或之后提问',
  cycle: '连线形成了环路（{quoted}）：循环必须只有一个入口节点，并有一个离开循环的条件分支',
  disabled_by_operator: '此部署不允许该功能，需要管理员开启',
  missing_secret: '密钥 {q0} 未设置',
  missing_api_key: '模型 {q0} 需要 API 密钥，但此部署未设置',
  missing_package: '代码导入的 {quoted} 未安装在代码沙箱中，需要管理员先安装',
  unknown_dataset: '知识库 {q0} 尚不存在，运行会在检索时失败；请先在「知识库」中创建并上传文档，或选择其他知识库',
  unreachable: '没有从开始节点到达此节点的路径，运行时会被跳过',
  unknown_node: '引用了不存在的节点 {q0}',
  not_ancestor: '引用的节点 {q0} 不在此节点的上游，可能尚未运行；请把它连接到上游',
  unknown_output: '节点 {q0} 没有输出 {q1}',
  type_mismatch: '引用 {q0} 的类型与「{field}」要求的类型不符',
  template_syntax: '「{field}」中的模板语法错误',
  unknown_template_name: '模板使用了 {q0}，它不是节点 ID、绑定变量或 inputs/sys/vars/nodes',
  unknown_input: '「{field}」引用了未声明的输入变量',
  unknown_variable: '「{field}」引用了未声明的运行变量',
  unknown_sys: '「{field}」引用了不存在的系统变量',
  unknown_conversation_variable: '「{field}」引用了未声明的会话变量',
  unknown_env: '「{field}」引用了未声明的环境变量',
  duplicate_env: '环境变量 {q0} 重复声明，请重命名或删除其中一个',
  unset_secret: '密钥环境变量 {q0} 尚未设置值，请在工作流的环境变量中设置',
};

/** A problem whose code has no template. */
export const ZH_CN_FALLBACK = '「{field}」有问题（{code}）';

/** Fixed English phrasings of field validation (engine/plain_errors.py) -> Chinese. */
export const ZH_CN_DETAILS: readonly (readonly [RegExp, string])[] = [
  [/^required, but missing/, '为必填项，但缺失'],
  [/^unknown field/, '：未知字段 {q0}'],
  [/^must be greater than /, '必须大于 {n0}'],
  [/^must be at least /, '必须至少为 {n0}'],
  [/^must be less than /, '必须小于 {n0}'],
  [/^must be at most /, '必须至多为 {n0}'],
  [/^must be a multiple of /, '必须是 {n0} 的倍数'],
  [/^must have at least \S+ character/, '至少需要 {n0} 个字符'],
  [/^must have at least /, '至少需要 {n0} 项'],
  [/^must have at most \S+ character/, '最多 {n0} 个字符'],
  [/^must have at most /, '最多 {n0} 项'],
  [/does not have the expected form/, '的格式不符合要求'],
  [/^unknown type/, '：未知类型 {q0}'],
  [/must be unique/, '中的 ID 必须唯一：{quoted}'],
  [/^must be /, '的取值类型或取值不符合要求'],
];

/** A detail no phrasing above matches. */
export const ZH_CN_DETAIL_FALLBACK = '的取值无效';
